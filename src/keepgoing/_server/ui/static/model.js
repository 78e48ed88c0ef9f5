// A run as the pages draw it. The server folds the history (keepgoing/_views/run_model.py):
// steps, attempts, waits, losses, messages, memory writes, reviews and the run's
// problems, with the rules the rest of keepgoing uses (why a worker stopped, what a
// rate limit is). The browser keeps no fold of its own; it only draws what it gets.

import { api, runPath } from "./api.js";

/** The folded model of a stored run (`upto`: only its events up to that seq;
 * `events`: the history too, as `model.events`, read with it once). */
export function runModel(workflowId, { runId, upto, events } = {}) {
  const params = new URLSearchParams();
  if (runId) params.set("run_id", runId);
  if (upto != null) params.set("upto", String(upto));
  if (events) params.set("events", "true");
  const q = params.toString();
  return api(`${runPath(workflowId)}/model${q ? `?${q}` : ""}`);
}

/** The folded model of a history's events (a file the replay page opened): the server
 * folds them and stores nothing. */
export function foldEvents(events) {
  return api("/api/v1/histories/fold", { method: "POST", body: { events } });
}

/** Every bar the timeline draws for a step: attempts, then the open one. */
export function bars(step) {
  const found = step.attempts.map((a) => ({ ...a }));
  if (step.current) found.push({ ...step.current, n: step.attempts.length + 1, worker: "" });
  return found;
}
