// The runs list: filters, pages, counts by status and by trouble, each run's trouble
// markers (worker lost ×2, retried ×9, waiting for review: counted by the store) and
// live updates (SSE when the server streams runs, else a refresh). Times follow the
// header's setting, and the "Created" inputs are read in the zone they are labelled with.

import { api, ApiError, can, clear, el, fmtDur, markerChips, offers, report, runBadge, runHref, runPath, timeEl, toast } from "./api.js";
import { fromInput, toInput, zoneLabel } from "./time.js";

const form = document.getElementById("filters");
const body = document.getElementById("runs-body");
const next = document.getElementById("next-page");
const note = document.getElementById("live-note");
const PAGE_SIZE = 50;
const state = { cursor: null, next: null, pages: [], features: null, refresh: null, asked: 0, retention: null };

// The retention policies in force (GET /api/v1/retention), read once: when each ended run goes.
async function retention() {
  if (state.retention === null) {
    try {
      state.retention = await api("/api/v1/retention");
    } catch {
      state.retention = { runs: null, workflows: {} };
    }
  }
  return state.retention;
}

function deletion(r) {
  const policy = state.retention;
  if (!policy || r.ended_at == null) return null;
  const own = policy.workflows ? policy.workflows[r.workflow_name] : null;
  const keep = own ?? policy.runs ?? null;
  if (keep === null) return null;
  const at = r.ended_at + keep;
  const left = at - Date.now() / 1000;
  const text = left > 0 ? `deleted in ${fmtDur(left)}` : "due for deletion";
  return el("div", { class: "muted small deletes", title: `deleted after ${new Date(at * 1000).toISOString()}`, dataset: { deletesAt: String(at) } }, text);
}

async function features() {
  if (state.features === null) {
    state.features = {
      cursor: await offers("/api/v1/runs", "cursor"),
      since: await offers("/api/v1/runs", "since"),
      q: await offers("/api/v1/runs", "q"),
      trouble: await offers("/api/v1/runs", "trouble"),
      counts: await offers("/api/v1/run-counts"),
      stream: await offers("/api/v1/stream/runs"),
    };
  }
  return state.features;
}

function filters() {
  const data = new FormData(form);
  const get = (k) => String(data.get(k) || "").trim();
  const at = (k) => {
    const t = fromInput(get(k));
    return t === null ? "" : String(t);
  };
  return { status: get("status"), trouble: get("trouble"), workflow: get("workflow"), since: at("since"), until: at("until"), id: get("id"), q: get("q"), revision: get("revision"), needs_patch: get("needs_patch") };
}

async function listQuery(f, position) {
  const has = await features();
  const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (f.status) q.set("status", f.status);
  if (f.workflow) q.set("workflow", f.workflow);
  if (f.since) q.set(has.since ? "since" : "created_after", f.since);
  if (f.until) q.set(has.since ? "until" : "created_before", f.until);
  if (f.q && has.q) q.set("q", f.q);
  if (f.trouble && has.trouble) q.set("trouble", f.trouble);
  if (f.revision) q.set("revision", f.revision);
  if (f.needs_patch) q.set("needs_patch", f.needs_patch);
  if (position !== null && position !== undefined) q.set(has.cursor ? "cursor" : "offset", String(position));
  return q;
}

async function load(position = null) {
  const f = filters();
  syncUrl(f);
  // Only the newest request may draw: an older answer arriving late would undo a filter.
  const asked = ++state.asked;
  try {
    let runs;
    let more = null;
    if (f.id) {
      try {
        runs = [await api(runPath(f.id))];
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) runs = [];
        else throw error;
      }
    } else {
      const data = await api(`/api/v1/runs?${await listQuery(f, position)}`);
      runs = data.runs;
      more = data.next_cursor ?? data.next_offset ?? null;
      const has = await features();
      if (f.q && !has.q) {
        const needle = f.q.toLowerCase();
        runs = runs.filter((r) => `${r.workflow_id} ${r.workflow_name} ${r.run_id} ${r.blocked_reason || ""} ${r.error ? r.error.message : ""}`.toLowerCase().includes(needle));
      }
    }
    await retention();
    if (asked !== state.asked) return;
    state.cursor = position;
    state.next = more;
    next.disabled = more === null;
    render(runs);
    document.getElementById("runs-table").dataset.shown = location.search; // drawn for this query
  } catch (error) {
    if (asked !== state.asked) return;
    clear(body, el("tr", {}, el("td", { colspan: "7", class: "error", role: "alert" }, error.message)));
  }
  loadCounts();
}

function render(runs) {
  if (!runs.length) {
    clear(body, el("tr", {}, el("td", { colspan: "7", class: "muted" }, "No runs match.")));
    return;
  }
  clear(body, runs.map(row));
}

function row(r) {
  // The markers the server worded; the status column already says blocked or waiting.
  const flags = markerChips(r.markers, { skip: ["blocked", "waiting_for_review"] });
  if (r.waiting_for) {
    const what = r.status === "queued" ? "◷ queued for a slot" : "◷ waiting for a worker";
    flags.push(el("span", { class: "flag waiting", title: r.waiting_for }, what));
  }
  if (r.status === "blocked") {
    flags.push(el("details", { class: "flag blocked" }, el("summary", {}, "⚠ blocked: show the diff"), el("pre", { class: "code" }, r.blocked_reason || "")));
  }
  const actions = [];
  if (r.status === "blocked" && can("runs.cancel")) {
    const button = el("button", { type: "button", class: "small", "aria-label": `Unblock ${r.workflow_id}` }, "Unblock");
    button.addEventListener("click", async () => {
      try {
        await api(`${runPath(r.workflow_id)}/unblock`, { method: "POST", body: { run_id: r.run_id } });
        toast(`Unblocked ${r.workflow_id}`);
        load(state.cursor);
      } catch (error) {
        report(error, "Unblock");
      }
    });
    actions.push(button);
  }
  const ended = r.ended_at ?? null;
  return el(
    "tr",
    { dataset: { workflowId: r.workflow_id, status: r.status, state: r.state || r.status } },
    el("td", { class: "c-status", dataset: { label: "Status" } }, runBadge(r)),
    el("td", { class: "c-name", dataset: { label: "Workflow" } }, r.workflow_name),
    el("td", { class: "c-id", dataset: { label: "Id" } }, el("a", { href: runHref(r.workflow_id, r.run_id), class: "run-link" }, r.workflow_id)),
    el("td", { class: "c-trouble", dataset: { label: "Trouble" } }, flags),
    el("td", { class: "c-created", dataset: { label: "Created" } }, timeEl(r.created_at)),
    el("td", { class: "c-took", dataset: { label: "Duration" } }, ended ? fmtDur(ended - r.created_at) : "—", deletion(r)),
    el("td", { class: "c-actions" }, actions),
  );
}

async function loadCounts() {
  if (!(await features()).counts) return;
  try {
    const data = await api("/api/v1/run-counts");
    for (const node of document.querySelectorAll("#counts [data-count]")) node.textContent = String(data.counts[node.dataset.count] ?? 0);
    const trouble = data.trouble || {};
    document.getElementById("trouble-counts").hidden = !("worker_lost" in trouble);
    for (const node of document.querySelectorAll("[data-trouble-count]")) {
      const n = trouble[node.dataset.troubleCount] ?? 0;
      node.textContent = String(n);
      node.parentElement.classList.toggle("none", n === 0);
    }
  } catch {
    /* the counts stay as rendered */
  }
}

function syncUrl(f) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v) q.set(k, v);
  history.replaceState(null, "", q.toString() ? `/?${q}` : "/");
}

function restore() {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of q) {
    const input = form.elements.namedItem(k);
    // The URL keeps instants as UNIX seconds, so it means the same in every zone.
    if (input) input.value = k === "since" || k === "until" ? toInput(Number(v)) : v;
  }
  for (const node of document.querySelectorAll(".zone-label")) node.textContent = `(${zoneLabel()})`;
}

async function live() {
  if ((await features()).stream) {
    const source = new EventSource("/api/v1/stream/runs");
    let pending = null;
    // Changes before the stream opened are not sent: reload once it is open (and after
    // each reconnect), so nothing falls between the first load and the stream.
    source.addEventListener("open", () => load(state.cursor));
    // An event `run` per run created or changed: reload the first page (once per burst).
    source.addEventListener("run", () => {
      if (state.cursor !== null || pending !== null) return; // only the first page moves
      pending = setTimeout(() => {
        pending = null;
        load(null);
      }, 300);
    });
    source.onerror = () => {
      if (source.readyState !== EventSource.CLOSED) return; // it reconnects by itself
      note.textContent = "Live updates stopped; refreshing every 5 s instead.";
      refreshEvery(5000);
    };
    note.textContent = "Live: the first page updates as runs start and change.";
    return;
  }
  note.textContent = "The first page refreshes every 3 s.";
  refreshEvery(3000);
}

function refreshEvery(ms) {
  clearInterval(state.refresh);
  state.refresh = setInterval(() => {
    if (document.hidden || state.cursor !== null) return; // bounded: only a visible first page
    load(null);
  }, ms);
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  state.pages = [];
  load(null);
});
form.addEventListener("reset", () => {
  // The inputs are emptied after this event, so the list reloads on the next turn;
  // the URL is cleared now (every filter's default is empty), so a reload in
  // between (a change of the time setting) does not bring the old filters back.
  history.replaceState(null, "", "/");
  setTimeout(() => load(null), 0);
});
next.addEventListener("click", () => {
  state.pages.push(state.cursor);
  load(state.next);
});
document.getElementById("first-page").addEventListener("click", () => {
  state.pages = [];
  load(null);
});
for (const button of document.querySelectorAll(".count")) {
  button.addEventListener("click", () => {
    if (button.dataset.status) form.elements.namedItem("status").value = button.dataset.status;
    if (button.dataset.trouble) form.elements.namedItem("trouble").value = button.dataset.trouble;
    load(null);
  });
}
restore();
load(null).then(live);
