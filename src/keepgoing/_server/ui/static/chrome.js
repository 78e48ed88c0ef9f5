// What every page shares: the time setting in the header, and the navigation's count
// of runs waiting for a reviewer (the store counts them: /api/v1/run-counts).

import { api, page } from "./api.js";
import { browserZone, setTimeMode, timeMode } from "./time.js";

const select = document.getElementById("time-mode");
const zone = document.getElementById("time-zone");

function describe() {
  const mode = timeMode();
  zone.textContent = mode === "utc" ? "" : browserZone();
  select.title = mode === "utc" ? "Times in UTC" : mode === "local" ? `Times in ${browserZone()}` : `Times relative to now; hover one for it in ${browserZone()}`;
}

select.value = timeMode();
describe();
select.addEventListener("change", () => {
  setTimeMode(select.value);
  // Every page draws its times once: drawing them again is a reload, which keeps
  // the page's own state in its URL.
  location.reload();
});

const badge = document.getElementById("nav-reviews");
async function reviews() {
  if (!badge || document.hidden) return;
  try {
    const data = await api("/api/v1/run-counts");
    const n = (data.trouble || {}).waiting_for_review || 0;
    badge.textContent = String(n);
    badge.hidden = n === 0;
    badge.setAttribute("aria-label", `${n} run${n === 1 ? "" : "s"} waiting for review`);
    badge.parentElement.title = n ? `${n} run${n === 1 ? "" : "s"} waiting for a reviewer` : "";
  } catch {
    /* signed out, or a server without the counts: no badge */
  }
}
if (badge && (page().can["runs.read"] || page().can.admin)) {
  reviews();
  setInterval(reviews, 10000);
}

// On a phone a table with class "cards" is drawn as one card per row (kg.css): each
// cell is labelled with its column's heading, kept up to date as rows are redrawn.
function labelCells(table) {
  const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
  for (const row of table.querySelectorAll("tbody tr")) {
    [...row.children].forEach((cell, i) => {
      if (heads[i] && cell.dataset.label !== heads[i] && !cell.hasAttribute("colspan")) cell.dataset.label = heads[i];
    });
  }
}
function labelAll() {
  for (const table of document.querySelectorAll("table.cards")) labelCells(table);
}
new MutationObserver(labelAll).observe(document.getElementById("main"), { childList: true, subtree: true });
labelAll();
