// A run's page: facts, flags and actions; the problems strip (each problem a link to
// its step, `n`/`p` to go through them); the timeline and the checkpoint inspector;
// history; lineage. Live while the run is open (SSE when the server streams a run's
// events, else a bounded refresh).

import { recoveryBox } from "./recovery.js";
import { api, ApiError, clear, el, fmtDur, json, markerChips, offers, page, report, reviewAnchor, runBadge, runHref, runPath, statusBadge, timeEl, toast } from "./api.js";
import { HistoryView } from "./history.js";
import { renderInspector } from "./inspector.js";
import { stepUsage } from "./cost.js";
import { runModel } from "./model.js";
import { tabs } from "./tabs.js";
import { Timeline } from "./timeline.js";

const { workflow_id: workflowId, run_id: runId } = page().page;
const OPEN = new Set(["running", "blocked"]);
const state = { run: null, events: [], model: null, selected: null, lineageShown: false, timer: null, stream: null, problems: [], problem: -1 };

const timeline = workflowId ? new Timeline(document.getElementById("timeline"), { onSelect: select, onLosses: () => goProblem(0) }) : null;
const history = workflowId ? new HistoryView(document.getElementById("panel-history")) : null;

if (workflowId) {
  tabs(document.querySelector(".tabs"), (id) => {
    if (id === "tab-lineage") showLineage();
    if (id === "tab-io") showIo();
  });
  wireActions();
  wireProblems();
  load().then((found) => {
    if (!found) return;
    // For the browser test and bench.ui_open: milliseconds from navigation to the
    // timeline drawn with the whole history.
    document.body.dataset.openedMs = String(Math.round(performance.now()));
    const wanted = Number(new URLSearchParams(location.search).get("step"));
    if (wanted) timeline.selectCmd(wanted, { center: true });
    follow();
  });
}

function query() {
  return runId ? `?${new URLSearchParams({ run_id: runId })}` : "";
}

/** Read the run and its history and draw them; false when there is nothing to draw
 * (no such run: the page says so and offers no action on it). */
async function load() {
  try {
    // The history and its fold come in one answer: the server reads the history once.
    const [run, model] = await Promise.all([api(`${runPath(workflowId)}${query()}`), runModel(workflowId, { runId, events: true })]);
    state.run = run;
    state.events = model.events;
    delete model.events;
    state.model = model;
    show();
    return true;
  } catch (error) {
    if (state.run === null) notFound(error);
    else report(error, "Refresh");
    return false;
  }
}

// A run whose rows retention deleted: its archive, when this server keeps one.
async function archivedRun(error) {
  if (!(error instanceof ApiError && error.status === 404)) return false;
  let doc;
  try {
    doc = await api(`/api/v1/archive/${encodeURIComponent(workflowId)}`);
  } catch {
    return false;
  }
  const run = doc.run || {};
  document.getElementById("run-title").replaceChildren("Archived run ", el("small", { class: "muted" }, workflowId));
  const replay = `/replay?url=${encodeURIComponent(`/api/v1/archive/${run.run_id || workflowId}`)}`;
  clear(
    document.getElementById("run-facts"),
    el("p", { class: "archived", id: "run-archived" }, el("strong", {}, "archived"), `: ${run.status || "ended"}; retention deleted its rows and kept its history in the archive.`),
    el("p", {}, `${(doc.events || []).length} events. Open it on the `, el("a", { href: replay }, "replay page"), " (give it the URL ", el("code", {}, `/api/v1/archive/${run.run_id || workflowId}`), ")."),
  );
  for (const id of ["actions", "run-tabs", "panel-timeline", "problems"]) toggle(id, false);
  return true;
}

async function notFound(error) {
  if (await archivedRun(error)) return;
  const missing = error instanceof ApiError && error.status === 404;
  document.getElementById("run-title").replaceChildren(missing ? "No such run" : "This run could not be read", " ", el("small", { class: "muted" }, workflowId));
  clear(
    document.getElementById("run-facts"),
    el("p", { class: "error", role: "alert", id: "run-missing" }, error.message),
    el("p", {}, "Find it in the ", el("a", { href: "/" }, "runs list"), "."),
  );
  for (const id of ["actions", "run-tabs", "panel-timeline", "problems"]) toggle(id, false);
}

// The change ids of keepgoing.patched() this run has passed on code with the change.
function patchesPassed(events) {
  const ids = [...new Set(events.filter((e) => e.type === "PatchMarked").map((e) => e.change_id))];
  return ids.length ? ids.join(", ") : "none";
}

// The newest value of each key the run published with keepgoing.set_status().
function publishedStatus(events) {
  const newest = new Map();
  for (const e of events) if (e.type === "StatusSet") newest.set(e.name, e.value);
  return [...newest.entries()];
}

function show() {
  const run = state.run;
  document.title = `${run.workflow_id} · keepgoing`;
  document.getElementById("run-title").replaceChildren(run.workflow_name, " ", el("small", { class: "muted" }, run.workflow_id), " ", runBadge(run), ...markerChips(run.markers, { skip: [run.state, run.status] }));
  clear(
    document.getElementById("run-facts"),
    fact("Run", run.run_id),
    fact("Queue", run.task_queue),
    fact("Started", timeEl(run.created_at)),
    fact("Ended", run.ended_at ? el("span", {}, timeEl(run.ended_at), ` (${fmtDur(run.ended_at - run.created_at)})`) : "—"),
    fact("Code", (run.code_version || "").slice(0, 12) || "—"),
    fact("Revision", run.group_revision == null ? "—" : String(run.group_revision), "run-revision"),
    fact("Patches", patchesPassed(state.events), "run-patches"),
  );
  const flags = [];
  const review = reviewBanner(run, state.model);
  if (review) flags.push(review);
  if (run.waiting_for) flags.push(el("p", { class: "banner warn", id: "waiting-flag" }, `◷ ${run.waiting_for}`));
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
  const published = publishedStatus(state.events);
  if (published.length) flags.push(el("div", { class: "facts-row", id: "run-status", "aria-label": "Published status" }, ...published.map(([key, value]) => fact(key, el("code", {}, json(value, 0))))));
  clear(document.getElementById("run-flags"), flags);
  const open = OPEN.has(run.status);
  for (const id of ["actions", "run-tabs"]) toggle(id, true);
  if (document.getElementById("tab-timeline").getAttribute("aria-selected") === "true") toggle("panel-timeline", true);
  toggle("cancel-run", open);
  toggle("unblock-run", run.status === "blocked");
  toggle("send-box", open); // an ended run takes no message
  toggle("kill-worker", run.status === "running" && state.model.steps.some((s) => s.current));
  timeline.update(state.model);
  showProblems();
  refreshUsage();
  history.update(state.events);
  if (state.selected !== null) select(state.model.steps.find((s) => s.cmd === state.selected), false);
  else renderInspector(document.getElementById("inspector"), null, state.model);
  if (state.lineageShown) showLineage();
}

// A run that waits for a reviewer: say so first, and link to each decision.
function reviewBanner(run, model) {
  if ((run.state || run.status) !== "waiting_for_review") return null;
  const waiting = model.steps.filter((s) => s.failReason === "uncertain" && !s.review && s.status === "uncertain");
  return el(
    "div",
    { class: "banner review", id: "review-banner", role: "status" },
    el("p", {}, el("b", {}, "Waiting for review. "), "A step's write may or may not have happened; the run holds no worker and carries on once a reviewer decides."),
    el(
      "ul",
      { class: "plain" },
      (waiting.length ? waiting : [null]).map((s) =>
        el(
          "li",
          {},
          s ? el("button", { type: "button", class: "link-button", onclick: () => timeline.selectCmd(s.cmd, { center: true }) }, `${s.name} #${s.cmd}`) : "A step",
          " · ",
          el("a", { href: s ? `/reviews#${reviewAnchor(s.operationId)}` : "/reviews", class: "decide-link" }, "Decide on the Reviews page"),
          s ? el("code", { class: "small" }, s.operationId) : null,
        ),
      ),
    ),
  );
}

// -- problems -------------------------------------------------------------------------
const PROBLEM_GLYPH = { worker_lost: "✕", uncertain: "?", rate_limited: "429", error: "!", timeout: "◷" };

function showProblems() {
  const found = state.model.problems;
  state.problems = found;
  state.problem = Math.min(state.problem, found.length - 1);
  const strip = document.getElementById("problems");
  strip.hidden = found.length === 0 && !state.model.steps.some((s) => s.reused);
  const counts = {};
  for (const p of found) counts[p.kind] = (counts[p.kind] || 0) + 1;
  document.getElementById("problems-title").textContent = found.length ? `Problems (${found.length})` : "Problems";
  clear(
    document.getElementById("problem-list"),
    found.map((p, i) =>
      el(
        "li",
        { class: `problem k-${p.kind}${i === state.problem ? " current" : ""}`, dataset: { kind: p.kind, cmd: String(p.cmd) } },
        el(
          "button",
          { type: "button", class: "link-button", onclick: () => goProblem(i) },
          el("span", { class: `glyph k-${p.kind}`, "aria-hidden": "true" }, PROBLEM_GLYPH[p.kind] || "•"),
          ` ${p.label}`,
        ),
      ),
    ),
  );
  document.getElementById("next-problem").disabled = found.length === 0;
  const reused = state.model.steps.filter((s) => s.reused).length;
  document.getElementById("problems-note").textContent = reused
    ? `After the worker loss the replacement reused the saved output of ${reused} finished step${reused > 1 ? "s" : ""}; they did not run again.`
    : "";
}

function goProblem(i) {
  if (!state.problems.length) return;
  state.problem = (i + state.problems.length) % state.problems.length;
  const p = state.problems[state.problem];
  document.getElementById("tab-timeline").click(); // the problem is on the timeline
  timeline.selectCmd(p.cmd, { center: true });
  for (const [n, node] of [...document.querySelectorAll("#problem-list li")].entries()) node.classList.toggle("current", n === state.problem);
  document.getElementById("next-problem").textContent = `Next problem (${state.problem + 1} of ${state.problems.length}) `;
  document.getElementById("next-problem").append(el("kbd", {}, "n"));
}

function wireProblems() {
  document.getElementById("next-problem").addEventListener("click", () => goProblem(state.problem + 1));
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || !state.problems.length) return;
    const target = event.target;
    if (target && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))) return;
    if (event.key === "n") goProblem(state.problem + 1);
    else if (event.key === "p") goProblem(state.problem - 1);
    else return;
    event.preventDefault();
  });
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
  const recovery = recoveryBox(state.run, step);
  if (recovery) document.getElementById("inspector").append(recovery);
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
    await load(); // a failure is shown by load
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
    Promise.all([api(`${runPath(workflowId)}${query()}`), runModel(workflowId, { runId })])
      .then(([run, model]) => {
        state.run = run;
        state.model = model; // folded by the server, with the events just streamed
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
      const step = state.model ? state.model.steps.find((s) => s.current) : null;
      const what = step ? `step ${step.name} #${step.cmd}` : "its current step";
      if (!confirm(`SIGKILL the worker running ${what} of ${workflowId}? The attempt is retried on another worker.`)) return;
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
    recoveryLineage(lineage),
    el("h3", {}, `Messages received (${m.messages.length})`),
    m.messages.length
      ? el("table", { class: "grid", id: "lineage-messages" }, el("thead", {}, el("tr", {}, ...["Time", "Name", "Sender", "Payload"].map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, m.messages.map((msg) => el("tr", {}, el("td", {}, timeEl(msg.at)), el("td", {}, msg.name), el("td", {}, senderLink(msg)), el("td", {}, el("code", {}, json(msg.payload, 0)))))))
      : el("p", { class: "muted" }, "None."),
    el("h3", {}, `Messages sent (${m.sent.length})`),
    m.sent.length
      ? el("table", { class: "grid" }, el("thead", {}, el("tr", {}, ...["Time", "To", "Name", "Outcome"].map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, m.sent.map((s) => el("tr", {}, el("td", {}, timeEl(s.at)), el("td", {}, el("a", { href: runHref(s.to) }, s.to)), el("td", {}, s.name), el("td", {}, s.delivered || "pending")))))
      : el("p", { class: "muted" }, "None."),
  );
}

// The run this one was resumed or forked from, and the runs made from it (both ways).
function recoveryLineage(lineage) {
  const link = (o, text) => el("li", { "data-kind": o.kind }, `${text} `, el("a", { href: runHref(o.workflow_id, o.run_id) }, o.workflow_id), o.step ? ` from step #${o.step}` : "");
  const made = { fork: "Forked from", resume: "Resumed from" };
  const gave = { fork: "Fork", resume: "Resumed as" };
  const rows = [
    ...(lineage.origin ? [link(lineage.origin, made[lineage.origin.kind] || lineage.origin.kind)] : []),
    ...(lineage.derived || []).map((d) => link(d, gave[d.kind] || d.kind)),
  ];
  return rows.length ? el("ul", { class: "lineage", id: "lineage-recovery", "aria-label": "Resumes and forks" }, ...rows) : el("p", { class: "muted", id: "lineage-recovery" }, "Not resumed or forked.");
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

