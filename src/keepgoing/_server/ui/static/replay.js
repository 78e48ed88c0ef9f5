// Replay a recorded run: a finished run of this server, or a history file (upload
// or URL). The playhead is an index into the events; the timeline, the inspector
// and the memory view show the run as it stood right after that event, as the
// server folds it (a stored run's history up to that event, or the file's first
// events, which the server folds and does not store).

import { api, clear, el, fmtClock, page, report, runPath, volumeHref } from "./api.js";
import { renderInspector } from "./inspector.js";
import { foldEvents, runModel } from "./model.js";
import { Timeline } from "./timeline.js";

const status = document.getElementById("replay-status");
const head = document.getElementById("playhead");
const play = document.getElementById("play");
const state = { events: [], at: 0, timer: null, selected: null, fromServer: false, source: null, model: null, models: new Map(), problems: [], problem: -1, drawing: 0 };
const jump = document.getElementById("to-retry");
const jumpNote = document.getElementById("jump-note");
const timeline = new Timeline(document.getElementById("timeline"), { onSelect: select });

function select(step) {
  state.selected = step.cmd;
  renderInspector(document.getElementById("inspector"), step, state.model, { live: false });
}

// The model after the first `n` events: a stored run's from its history, a file's
// folded from its events; each asked for once.
function modelAt(n) {
  if (!state.models.has(n)) {
    const shown = state.events.slice(0, n);
    const source = state.source;
    const asked = source ? runModel(source.workflowId, { runId: source.runId, upto: shown.length ? shown[shown.length - 1].seq : 0 }) : foldEvents(shown);
    state.models.set(n, asked);
    asked.catch(() => state.models.delete(n));
  }
  return state.models.get(n);
}

async function load(events, label, fromServer, source = null) {
  if (!Array.isArray(events) || !events.length || !events.every((e) => e && typeof e.type === "string" && typeof e.seq === "number")) {
    status.textContent = `${label}: not a keepgoing history (expected {"events": [...]} with a type and seq on each event).`;
    status.className = "error";
    return;
  }
  pause();
  state.events = events;
  state.fromServer = fromServer;
  state.source = source;
  state.models = new Map();
  state.selected = null;
  // The recording's problems, worker losses first: what the jump button goes through.
  try {
    state.problems = (await modelAt(events.length)).problems;
  } catch (error) {
    status.textContent = `${label}: ${error.message}`;
    status.className = "error";
    return;
  }
  state.problem = -1;
  labelJump();
  head.max = String(events.length);
  head.value = "0";
  status.className = "muted";
  status.textContent = `${label}: ${events.length} events. Press Play, drag the playhead, or use ← → on it.`;
  document.getElementById("scrubber").hidden = false;
  document.getElementById("replay-view").hidden = false;
  await seek(1);
}

async function seek(n) {
  state.at = Math.max(0, Math.min(state.events.length, n));
  head.value = String(state.at);
  const drawing = ++state.drawing;
  let model;
  try {
    model = await modelAt(state.at);
  } catch (error) {
    status.textContent = error.message;
    status.className = "error";
    return;
  }
  if (drawing !== state.drawing) return; // the playhead moved on meanwhile
  const shown = state.events.slice(0, state.at);
  state.model = model;
  // The axis spans the whole recording, so the bars grow in place as the playhead moves.
  if (state.events.length) {
    state.model.first = state.events[0].at;
    state.model.last = Math.max(state.model.last ?? 0, state.events[state.events.length - 1].at);
  }
  const last = shown[shown.length - 1];
  document.getElementById("playhead-text").textContent = last ? `event ${state.at} of ${state.events.length} · ${last.type} · ${fmtClock(last.at, true)}` : "start";
  timeline.update(state.model);
  const step = state.selected !== null ? state.model.steps.find((s) => s.cmd === state.selected) : null;
  const current = step || latestStep(state.model);
  if (current) {
    state.selected = current.cmd;
    timeline.selectCmd(current.cmd);
  } else renderInspector(document.getElementById("inspector"), null, state.model, { live: false });
  renderMemory();
}

function latestStep(model) {
  return model.steps.length ? model.steps[model.steps.length - 1] : null;
}

function renderMemory() {
  const box = document.getElementById("replay-memory");
  const writes = state.model.memory;
  const latest = new Map();
  for (const w of writes) latest.set(`${w.volume}@${w.ref}`, w);
  clear(
    box,
    el("h2", {}, "Memory at this point"),
    writes.length
      ? el(
          "ul",
          { class: "plain", id: "replay-memory-list" },
          [...latest.values()].map((w) =>
            el(
              "li",
              {},
              state.fromServer ? el("a", { href: volumeHref(w.volume, w.version, w.ref) }, `${w.volume} v${w.version}`) : `${w.volume} v${w.version}`,
              ` — last written by step #${w.cmd} attempt ${w.attempt}: ${w.paths.join(", ")}`,
            ),
          ),
        )
      : el("p", { class: "muted", id: "replay-memory-list" }, "No memory written yet."),
    writes.length > latest.size ? el("p", { class: "muted" }, `${writes.length} writes so far.`) : null,
  );
}

// Inputs are the events that move a run; stepping goes from one to the next.
const MOVES = new Set(["WorkflowStarted", "TaskCompleted", "TaskAttemptFailed", "TaskFailed", "TimerFired", "MessageReceived", "EventReceived", "ChildEnded", "MemoryCommitted", "WorkflowCompleted", "WorkflowFailed", "WorkflowCancelled", "WorkflowBlocked"]);

function nextMove(from, dir) {
  let i = from + dir;
  while (i > 0 && i < state.events.length && !MOVES.has(state.events[i - 1].type)) i += dir;
  return i;
}

function tick() {
  if (state.at >= state.events.length) {
    pause();
    return;
  }
  seek(nextMove(state.at, 1));
  state.timer = setTimeout(tick, Number(document.getElementById("speed").value));
}

function pause() {
  clearTimeout(state.timer);
  state.timer = null;
  play.textContent = "▶ Play";
  play.setAttribute("aria-label", "Play");
}

play.addEventListener("click", () => {
  if (state.timer) {
    pause();
    return;
  }
  if (state.at >= state.events.length) seek(0);
  play.textContent = "‖ Pause";
  play.setAttribute("aria-label", "Pause");
  tick();
});
head.addEventListener("input", () => {
  pause();
  seek(Number(head.value));
});
document.getElementById("step-fwd").addEventListener("click", () => {
  pause();
  seek(nextMove(state.at, 1));
});
document.getElementById("step-back").addEventListener("click", () => {
  pause();
  seek(nextMove(state.at, -1));
});
const FIRST = { worker_lost: "Jump to the worker loss", uncertain: "Jump to the uncertain step", rate_limited: "Jump to the retried step", error: "Jump to the retried step", timeout: "Jump to the timed-out step" };

function labelJump() {
  const n = state.problems.length;
  jump.disabled = n === 0;
  if (!n) jump.textContent = "No problem to jump to";
  else if (state.problem < 0) jump.textContent = FIRST[state.problems[0].kind] || "Jump to the first problem";
  else jump.textContent = `Next problem (${((state.problem + 1) % n) + 1} of ${n})`;
  jumpNote.textContent = state.problem >= 0 ? `Problem ${state.problem + 1} of ${n}: ${state.problems[state.problem].label}` : "";
}

// Each press goes to the next problem, worker losses first, then the steps waiting for
// a review, then the other retries in order: just after it was resolved (the retry
// completed) or the failure, with the step open in the inspector.
jump.addEventListener("click", async () => {
  pause();
  if (!state.problems.length) return;
  state.problem = (state.problem + 1) % state.problems.length;
  const stop = state.problems[state.problem];
  const index = state.events.findIndex((e) => e.seq === stop.seq);
  state.selected = stop.cmd;
  await seek(index >= 0 ? index + 1 : state.events.length);
  timeline.selectCmd(stop.cmd, { center: true });
  labelJump();
});

document.getElementById("src-run").addEventListener("submit", async (event) => {
  event.preventDefault();
  const id = document.getElementById("src-id").value.trim();
  try {
    const [run, history] = await Promise.all([api(runPath(id)), api(`${runPath(id)}/history`)]);
    if (run.status === "running") status.textContent = "";
    await load(history.events, `${run.workflow_name} ${run.workflow_id} (${run.status})`, true, { workflowId: run.workflow_id, runId: run.run_id });
  } catch (error) {
    report(error, "Load the run");
    status.textContent = error.message;
    status.className = "error";
  }
});
// A history file's text: an export, or a run's archive (gzip, told by its first bytes).
async function fileText(file) {
  const head = new Uint8Array(await file.slice(0, 2).arrayBuffer());
  if (head[0] !== 0x1f || head[1] !== 0x8b) return file.text();
  return new Response(file.stream().pipeThrough(new DecompressionStream("gzip"))).text();
}

document.getElementById("src-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  try {
    const doc = JSON.parse(await fileText(file));
    load(Array.isArray(doc) ? doc : doc.events, doc.run ? `${file.name} (archived run)` : file.name, false);
  } catch (error) {
    status.textContent = `${file.name}: not JSON (${error.message})`;
    status.className = "error";
  }
});
document.getElementById("src-url").addEventListener("submit", async (event) => {
  event.preventDefault();
  const url = document.getElementById("src-url-input").value.trim();
  let where;
  try {
    where = new URL(url, location.href);
  } catch (error) {
    status.textContent = `${url}: not a URL`;
    status.className = "error";
    return;
  }
  // The page may connect to this server only (its policy says connect-src 'self').
  if (where.origin !== location.origin) {
    status.textContent = `${url}: this page loads only from this server; download the file and open it above`;
    status.className = "error";
    return;
  }
  try {
    const response = await fetch(where, { credentials: "same-origin" });
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    const doc = await response.json();
    load(Array.isArray(doc) ? doc : doc.events, url, true);
  } catch (error) {
    status.textContent = `${url}: ${error.message}`;
    status.className = "error";
  }
});

// The recordings shipped with keepgoing (static/recordings/, written by `make record-demo`).
async function loadRecording(name) {
  try {
    const response = await fetch(`/ui/static/recordings/${encodeURIComponent(name)}.history.json`);
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    const doc = await response.json();
    load(doc.events, `Recorded run: ${name}`, false);
  } catch (error) {
    status.textContent = `the recording ${name} could not be loaded: ${error.message}`;
    status.className = "error";
  }
}
for (const button of document.querySelectorAll("[data-recording]")) {
  button.addEventListener("click", () => loadRecording(button.dataset.recording));
}

const initial = page().page.workflow_id;
const fromUrl = new URLSearchParams(location.search).get("url");  // an archived run's page links here
if (initial) document.getElementById("src-run").requestSubmit();
else if (fromUrl) {
  document.getElementById("src-url-input").value = fromUrl;
  document.getElementById("src-url").requestSubmit();
}
else if (page().page.recording) loadRecording(page().page.recording);
