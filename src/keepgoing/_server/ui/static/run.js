// A run's page: facts, flags and actions; the timeline and the checkpoint
// inspector; history; lineage. Live while the run is open (SSE when the server
// streams a run's events, else a bounded refresh).

import { api, clear, el, fmtDur, fmtTime, json, offers, page, report, runHref, runPath, statusBadge, toast } from "./api.js";
import { HistoryView } from "./history.js";
import { renderInspector } from "./inspector.js";
import { stepUsage } from "./cost.js";
import { buildModel } from "./model.js";
import { tabs } from "./tabs.js";
import { Timeline } from "./timeline.js";

const { workflow_id: workflowId, run_id: runId } = page().page;
const OPEN = new Set(["running", "blocked"]);
const state = { run: null, events: [], model: null, selected: null, lineageShown: false, timer: null, stream: null };

const timeline = workflowId ? new Timeline(document.getElementById("timeline"), { onSelect: select }) : null;
const history = workflowId ? new HistoryView(document.getElementById("panel-history")) : null;

if (workflowId) {
  tabs(document.querySelector(".tabs"), (id) => {
    if (id === "tab-lineage") showLineage();
    if (id === "tab-io") showIo();
  });
  wireActions();
  load().then(() => {
    // For the browser test and bench.ui_open: milliseconds from navigation to the
    // timeline drawn with the whole history.
    document.body.dataset.openedMs = String(Math.round(performance.now()));
    const wanted = Number(new URLSearchParams(location.search).get("step"));
    if (wanted) timeline.selectCmd(wanted);
    follow();
  });
}

function query() {
  return runId ? `?${new URLSearchParams({ run_id: runId })}` : "";
}

async function load() {
  try {
    const [run, history] = await Promise.all([api(`${runPath(workflowId)}${query()}`), api(`${runPath(workflowId)}/history${query()}`)]);
    state.run = run;
    state.events = history.events;
    show();
  } catch (error) {
    clear(document.getElementById("run-facts"), el("p", { class: "error", role: "alert" }, error.message));
    throw error;
  }
}

// The change ids of keepgoing.patched() this run has passed on code with the change.
function patchesPassed(events) {
  const ids = [...new Set(events.filter((e) => e.type === "PatchMarked").map((e) => e.change_id))];
  return ids.length ? ids.join(", ") : "none";
}

function show() {
  const run = state.run;
  state.model = buildModel(state.events, { now: OPEN.has(run.status) ? Date.now() / 1000 : null });
  document.getElementById("run-title").replaceChildren(run.workflow_name, " ", el("small", { class: "muted" }, run.workflow_id), " ", statusBadge(run.status));
  clear(
    document.getElementById("run-facts"),
    fact("Run", run.run_id),
    fact("Queue", run.task_queue),
    fact("Started", fmtTime(run.created_at)),
    fact("Ended", run.ended_at ? `${fmtTime(run.ended_at)} (${fmtDur(run.ended_at - run.created_at)})` : "—"),
    fact("Code", (run.code_version || "").slice(0, 12) || "—"),
    fact("Revision", run.group_revision == null ? "—" : String(run.group_revision), "run-revision"),
    fact("Patches", patchesPassed(state.events), "run-patches"),
  );
  const flags = [];
  if (run.waiting_for) flags.push(el("p", { class: "banner warn", id: "waiting-flag" }, `⏳ ${run.waiting_for}`));
  if (run.status === "blocked") {
    flags.push(
      el(
        "div",
        { class: "banner error", id: "blocked-flag" },
        el("p", {}, "Blocked: the code that served this run does not replay its history. The diff:"),
        el("pre", { class: "code" }, run.blocked_reason || ""),
      ),
    );
  }
  if (run.error) flags.push(el("p", { class: "banner error" }, `${run.error.type}: ${run.error.message}`));
  clear(document.getElementById("run-flags"), flags);
  const open = OPEN.has(run.status);
  toggle("cancel-run", open);
  toggle("unblock-run", run.status === "blocked");
  toggle("kill-worker", run.status === "running" && state.model.steps.some((s) => s.current));
  timeline.update(state.model);
  refreshUsage();
  history.update(state.events);
  if (state.selected !== null) select(state.model.steps.find((s) => s.cmd === state.selected), false);
  else renderInspector(document.getElementById("inspector"), null, state.model);
  if (state.lineageShown) showLineage();
}

// Each step's model-call tokens and cost, from the server's steps view: read again
// (at most every 3 s) while the run is open, since a running step's calls add up.
async function refreshUsage() {
  const ended = !OPEN.has(state.run.status);
  if (state.usageFor === state.run.updated_at || (state.usageAt && Date.now() - state.usageAt < 3000 && !ended)) return;
  state.usageFor = state.run.updated_at;
  state.usageAt = Date.now();
  if (!(await offers("/api/v1/runs/{workflow_id}/steps"))) return;
  try {
    timeline.setUsage(await stepUsage(api, runPath(workflowId), runId));
  } catch {
    // the timeline goes on without the figures
  }
}

function fact(label, value, id) {
  const attrs = id ? { class: "fact", id } : { class: "fact" };
  return el("span", attrs, el("span", { class: "muted" }, `${label} `), value);
}

function toggle(id, on) {
  const node = document.getElementById(id);
  if (node) node.hidden = !on;
}

function select(step, open) {
  if (!step) return;
  const signature = `${step.cmd}:${step.status}:${step.attempts.length}:${step.memory.length}:${Boolean(step.reused)}`;
  if (!open && signature === state.shown) return; // unchanged: keep it (and its logs) as is
  state.shown = signature;
  state.selected = step.cmd;
  renderInspector(document.getElementById("inspector"), step, state.model);
  if (open && window.matchMedia("(max-width: 900px)").matches) document.getElementById("inspector").focus();
}

// -- live ---------------------------------------------------------------------------
async function follow() {
  if (!OPEN.has(state.run.status)) return;
  if (state.polling || (state.stream && state.stream.readyState !== EventSource.CLOSED)) return;
  if (await offers("/api/v1/runs/{workflow_id}/stream")) {
    stream();
    return;
  }
  poll();
}

function poll() {
  state.polling = true;
  const interval = Math.min(5000, 1000 + state.events.length / 5); // bigger runs refresh slower
  state.timer = setTimeout(async () => {
    try {
      await load();
    } catch {
      /* shown by load */
    }
    if (OPEN.has(state.run.status)) poll();
    else state.polling = false;
  }, interval);
}

function stream() {
  // The server's run stream: an event `history` per new event (its id is the seq, so a
  // reconnecting EventSource resumes after it), then `end` with the run view.
  const after = state.events.length ? state.events[state.events.length - 1].seq : 0;
  const params = new URLSearchParams({ after: String(after) });
  if (runId) params.set("run_id", runId);
  const source = new EventSource(`${runPath(workflowId)}/stream?${params}`);
  state.stream = source;
  let pending = null;
  const apply = () => {
    pending = null;
    api(`${runPath(workflowId)}${query()}`)
      .then((run) => {
        state.run = run;
        show();
      })
      .catch(() => {});
  };
  source.addEventListener("history", (message) => {
    try {
      const event = JSON.parse(message.data);
      if (event && event.type && event.seq > (state.events.at(-1)?.seq ?? 0)) state.events.push(event);
    } catch {
      return;
    }
    if (pending === null) pending = setTimeout(apply, 150); // one redraw per burst
  });
  source.addEventListener("end", (message) => {
    source.close();
    try {
      state.run = JSON.parse(message.data);
    } catch {
      /* fetched below */
    }
    clearTimeout(pending);
    apply();
  });
  source.onerror = () => {
    // EventSource reconnects by itself (the server ends streams after --stream-max);
    // only a stream the browser gave up on falls back to refreshing.
    if (source.readyState === EventSource.CLOSED) poll();
  };
  // While open, refresh the run view now and then too: its status can change with no
  // new event (a worker appears for a run that waited for one).
  state.timer = setInterval(() => {
    if (!OPEN.has(state.run.status)) clearInterval(state.timer);
    else if (pending === null) apply();
  }, 5000);
}

// -- actions ------------------------------------------------------------------------
function wireActions() {
  // The history file is made when asked for, not on every redraw.
  const link = document.getElementById("export-link");
  link.addEventListener("click", () => {
    if (link.href.startsWith("blob:")) URL.revokeObjectURL(link.href);
    const blob = new Blob([JSON.stringify({ events: state.events }, null, 1)], { type: "application/json" });
    link.href = URL.createObjectURL(blob);
    link.download = `${state.run.workflow_id.replace(/[^A-Za-z0-9._-]/g, "_")}.history.json`;
  });
  const cancel = document.getElementById("cancel-run");
  if (cancel) {
    cancel.addEventListener("click", async () => {
      if (!confirm(`Cancel ${workflowId}? Its workflow sees CancelledError at its current await.`)) return;
      try {
        await api(`${runPath(workflowId)}/cancel`, { method: "POST", body: runId ? { run_id: runId } : {} });
        toast("Cancel requested");
        await load();
        follow();
      } catch (error) {
        report(error, "Cancel");
      }
    });
  }
  const unblock = document.getElementById("unblock-run");
  if (unblock) {
    unblock.addEventListener("click", async () => {
      try {
        await api(`${runPath(workflowId)}/unblock`, { method: "POST", body: runId ? { run_id: runId } : {} });
        toast("Unblocked: the next worker that serves it replays it");
        await load();
        follow();
      } catch (error) {
        report(error, "Unblock");
      }
    });
  }
  const kill = document.getElementById("kill-worker");
  if (kill) {
    kill.addEventListener("click", async () => {
      try {
        const answer = await api(`${runPath(workflowId)}/kill-worker`, { method: "POST", body: { via: "ui" } });
        toast(`Killed worker ${answer && answer.worker_id ? answer.worker_id : ""}: its attempt will be retried on another worker`);
      } catch (error) {
        report(error, "Kill the worker");
      }
    });
  }
  const form = document.getElementById("send-form");
  if (form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      let payload;
      try {
        payload = JSON.parse(document.getElementById("msg-payload").value || "null");
      } catch (error) {
        toast(`The payload is not JSON: ${error.message}`, "error");
        return;
      }
      try {
        const sent = await api(`${runPath(workflowId)}/messages`, { method: "POST", body: { name: document.getElementById("msg-name").value, payload, ...(runId ? { run_id: runId } : {}) } });
        toast(`Sent message ${sent.message_id}`);
      } catch (error) {
        report(error, "Send");
      }
    });
  }
}

// -- lineage and io -------------------------------------------------------------------
async function showLineage() {
  state.lineageShown = true;
  const panel = document.getElementById("panel-lineage");
  let lineage = null;
  try {
    lineage = await api(`${runPath(workflowId)}/lineage`);
  } catch (error) {
    clear(panel, el("p", { class: "error" }, error.message));
    return;
  }
  const m = state.model;
  const runRow = (r, role) => el("li", {}, `${role}: `, el("a", { href: runHref(r.workflow_id, r.run_id) }, `${r.workflow_name} ${r.workflow_id}`), " ", statusBadge(r.status));
  clear(
    panel,
    el("h2", {}, "Lineage"),
    el(
      "ul",
      { class: "lineage", id: "lineage-runs" },
      lineage.parent ? runRow(lineage.parent, "Parent") : el("li", { class: "muted" }, "No parent: started directly."),
      runRow(lineage.run, "This run"),
      ...lineage.children.map((c) => runRow(c, "Child")),
    ),
    el("h3", {}, `Messages received (${m.messages.length})`),
    m.messages.length
      ? el("table", { class: "grid", id: "lineage-messages" }, el("thead", {}, el("tr", {}, ...["Time", "Name", "Sender", "Payload"].map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, m.messages.map((msg) => el("tr", {}, el("td", {}, fmtTime(msg.at)), el("td", {}, msg.name), el("td", {}, senderLink(msg)), el("td", {}, el("code", {}, json(msg.payload, 0)))))))
      : el("p", { class: "muted" }, "None."),
    el("h3", {}, `Messages sent (${m.sent.length})`),
    m.sent.length
      ? el("table", { class: "grid" }, el("thead", {}, el("tr", {}, ...["Time", "To", "Name", "Outcome"].map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, m.sent.map((s) => el("tr", {}, el("td", {}, fmtTime(s.at)), el("td", {}, el("a", { href: runHref(s.to) }, s.to)), el("td", {}, s.name), el("td", {}, s.delivered || "pending")))))
      : el("p", { class: "muted" }, "None."),
  );
}

function senderLink(msg) {
  if (msg.senderKind === "workflow") return el("a", { href: runHref(msg.senderId) }, `workflow ${msg.senderId}`);
  return `${msg.senderKind} ${msg.senderId}`;
}

function showIo() {
  const run = state.run;
  clear(
    document.getElementById("panel-io"),
    el("h2", {}, "Input"),
    el("pre", { class: "code", id: "run-input" }, json(run.input)),
    el("h2", {}, "Result"),
    run.status === "completed" ? el("pre", { class: "code", id: "run-result" }, json(run.result)) : el("p", { class: "muted" }, run.error ? `${run.error.type}: ${run.error.message}` : "Not finished."),
  );
}

