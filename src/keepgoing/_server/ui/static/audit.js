// The audit log: who did what, newest first, filtered by action or workflow id.

import { api, clear, el, timeEl, json, runHref } from "./api.js";

const form = document.getElementById("audit-form");
const prev = document.getElementById("audit-prev");
const next = document.getElementById("audit-next");
const state = { offset: 0, next: null, asked: 0 };

async function load() {
  const data = new FormData(form);
  const q = new URLSearchParams({ limit: "100", offset: String(state.offset) });
  for (const key of ["action", "workflow_id"]) {
    const value = String(data.get(key) || "").trim();
    if (value) q.set(key, value);
  }
  const body = document.getElementById("audit-body");
  // Only the newest request may draw: an older answer arriving late would undo the filter.
  const asked = ++state.asked;
  try {
    const page = await api(`/api/v1/audit?${q}`);
    if (asked !== state.asked) return;
    state.next = page.next_offset;
    prev.disabled = state.offset === 0;
    next.disabled = state.next === null;
    clear(
      body,
      page.entries.length
        ? page.entries.map((e) => el("tr", { dataset: { action: e.action } }, el("td", {}, timeEl(e.at)), el("td", {}, `${e.actor_kind} ${e.actor_id}`), el("td", {}, e.action), el("td", {}, e.workflow_id ? el("a", { href: runHref(e.workflow_id, e.run_id) }, e.workflow_id) : "—"), el("td", {}, el("code", {}, json(e.detail, 0)))))
        : el("tr", {}, el("td", { colspan: "5", class: "muted" }, "Nothing recorded.")),
    );
  } catch (error) {
    if (asked !== state.asked) return;
    clear(body, el("tr", {}, el("td", { colspan: "5", class: "error", role: "alert" }, error.message)));
  }
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  state.offset = 0;
  load();
});
prev.addEventListener("click", () => {
  state.offset = Math.max(0, state.offset - 100);
  load();
});
next.addEventListener("click", () => {
  state.offset = state.next ?? state.offset;
  load();
});
load();
