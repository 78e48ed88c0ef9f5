// The demo page: replay the recorded run, start a live run and kill its worker, and
// start the use cases. Its data comes from /api/v1/demo, which only `keepgoing demo`
// serves; on any other server the page says so and offers the recording alone.

import { api, clear, el, enc, page, report, runHref, runPath, statusBadge, toast } from "./api.js";

const live = document.getElementById("live-runs");
const liveStatus = document.getElementById("live-status");
const kill = document.getElementById("demo-kill");
const start = document.getElementById("start-live");
const state = { demo: null, runs: new Map(), timer: null };

function latestLive() {
  const runs = state.demo ? state.demo.live_runs : [];
  return runs.length ? runs[runs.length - 1] : null;
}

async function refresh() {
  try {
    state.demo = await api("/api/v1/demo");
  } catch (error) {
    if (error.status === 404) {
      start.disabled = true;
      clear(document.getElementById("use-cases"), el("p", { class: "muted" }, "The use cases run under keepgoing demo."));
      return;
    }
    report(error, "Read the demo");
    return;
  }
  const demo = state.demo;
  document.getElementById("demo-model").textContent = `Model: ${demo.model}`;
  document.getElementById("live-about").textContent =
    `Start a live run of ${demo.live.tickets} tickets in ${demo.live.batches} batches, with a durable wait of ${demo.live.pause_seconds} s between batches` +
    `${demo.fast ? " (the short mode)" : " (about seven minutes)"}, then choose Kill the worker while a step is running.`;
  start.disabled = !demo.ready;
  await Promise.all(demo.live_runs.map(async (r) => state.runs.set(r.workflow_id, await api(runPath(r.workflow_id)).catch(() => null))));
  clear(
    live,
    ...demo.live_runs.map((r) => {
      const run = state.runs.get(r.workflow_id);
      return el("li", {}, el("a", { href: runHref(r.workflow_id), class: "live-run" }, r.workflow_id), " ", run ? statusBadge(run.status) : "");
    }),
  );
  const current = latestLive();
  const run = current ? state.runs.get(current.workflow_id) : null;
  kill.disabled = !run || run.status !== "running";
  renderCases(demo.use_cases);
}

function renderCases(cases) {
  const box = document.getElementById("use-cases");
  if (!cases.length) {
    clear(box, el("p", { class: "muted", id: "no-use-cases" }, "No use cases are installed in this demo."));
    return;
  }
  clear(
    box,
    ...cases.map((u) =>
      el(
        "article",
        { class: "card use-case", "data-key": u.key },
        el("p", { class: "muted" }, `${u.key} · ${u.area}`),
        el("h3", {}, u.title),
        el("p", {}, u.summary),
        el("button", { type: "button", class: "primary", "data-start": u.key }, `Start ${u.key}`),
        u.workflow_id ? el("p", {}, el("a", { href: runHref(u.workflow_id) }, `Open the run ${u.workflow_id}`)) : null,
      ),
    ),
  );
  for (const button of box.querySelectorAll("[data-start]")) {
    button.addEventListener("click", () => startCase(button));
  }
}

async function startCase(button) {
  button.disabled = true;
  const key = button.dataset.start;
  try {
    const answer = await api(`/api/v1/demo/use-cases/${enc(key)}/start`, { method: "POST", body: {} });
    toast(`${key} started: ${answer.workflow_id}`);
    location.assign(answer.url);
  } catch (error) {
    report(error, `Start ${key}`);
    button.disabled = false;
  }
}

start.addEventListener("click", async () => {
  start.disabled = true;
  try {
    const answer = await api("/api/v1/demo/live", { method: "POST", body: {} });
    liveStatus.textContent = `Started ${answer.workflow_id}. Follow it on its page, or press Kill the worker while a step runs.`;
    await refresh();
  } catch (error) {
    report(error, "Start a live run");
  } finally {
    start.disabled = !(state.demo && state.demo.ready);
  }
});

kill.addEventListener("click", async () => {
  const current = latestLive();
  if (!current) return;
  try {
    const answer = await api(`${runPath(current.workflow_id)}/kill-worker`, { method: "POST", body: {} });
    liveStatus.textContent = `Killed worker ${answer.worker_id} during step #${answer.cmd}: a fresh worker retries that step; the finished ones stay.`;
    toast(`Killed worker ${answer.worker_id}`);
  } catch (error) {
    if (error.code === "nothing_running") {
      liveStatus.textContent = "No step is running right now: between steps, or while the run waits on a durable timer, no worker holds it. Try again in a moment.";
    } else {
      liveStatus.textContent = `The kill did not go through: ${error.message}`;
      report(error, "Kill the worker");
    }
  } finally {
    kill.dataset.answers = String(Number(kill.dataset.answers || 0) + 1); // one per press
  }
});

if (page().page.running) {
  refresh();
  state.timer = setInterval(refresh, 2000);
} else {
  start.disabled = true;
  renderCases([]);
}
