// The checkpoint inspector: one step's attempts first (how each ended and why), then a
// reviewer's decision and the result the run used, its output, operation id, inputs,
// memory writes and logs, and whether a replacement worker reused its output.

import { api, el, clear, enc, fmtDur, json, offers, reviewAnchor, timeEl, volumeHref } from "./api.js";
import { usageText } from "./cost.js";

const STATUS_TEXT = { sent_back: "sent back", approved: "approved" };

export function renderInspector(root, step, model, { live = true } = {}) {
  if (!step) {
    clear(root, el("p", { class: "muted" }, "Select a step in the timeline to inspect its checkpoint."));
    return;
  }
  const attempts = [...step.attempts];
  if (step.current) attempts.push({ ...step.current, n: step.attempts.length + 1, worker: "", error: null });
  const logs = el("div", { class: "logs", id: "insp-logs" });
  clear(
    root,
    el("h2", { id: "inspector-title" }, `${step.name} `, el("span", { class: `badge s-${step.status}` }, STATUS_TEXT[step.status] || step.status)),
    reviewBox(step),
    step.reused
      ? el(
          "p",
          { class: "reused", role: "note" },
          "Replacement worker reused the saved output.",
          el("span", { class: "muted" }, ` ${step.reused.by} took over after ${step.reused.lost} was lost; this step was not run again.`),
        )
      : null,
    el("h3", {}, `Attempts (${attempts.length})`),
    el(
      "table",
      { class: "grid attempts", id: "insp-attempts" },
      el("thead", {}, el("tr", {}, ...["#", "Outcome", "Worker · started · took"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, attempts.map(attemptRow)),
    ),
    el("h3", {}, step.review && step.review.decision === "approve" ? "Result the run used" : "Output"),
    output(step),
    el(
      "dl",
      { class: "facts" },
      el("dt", {}, "Operation id"),
      el("dd", {}, el("code", {}, step.operationId)),
      el("dt", {}, "Step"),
      el("dd", {}, `#${step.cmd} · scheduled `, timeEl(step.scheduledAt), step.endedAt ? ` · took ${fmtDur(step.endedAt - step.scheduledAt)}` : ""),
      el("dt", {}, "Retries allowed"),
      el("dd", {}, `${step.retries} · timeout ${fmtDur(step.timeout)}`),
    ),
    el("h3", {}, "Inputs"),
    el("pre", { class: "code", id: "insp-inputs" }, json({ args: step.args, kwargs: step.kwargs })),
    el("h3", {}, "Memory written"),
    step.memory.length
      ? el(
          "ul",
          { id: "insp-memory" },
          step.memory.map((m) =>
            el(
              "li",
              {},
              el("a", { href: volumeHref(m.volume, m.version, m.ref) }, `${m.volume} v${m.version}`),
              ` (attempt ${m.attempt}): ${m.paths.join(", ")}`,
            ),
          ),
        )
      : el("p", { class: "muted", id: "insp-memory" }, "This step wrote no memory."),
    el("h3", {}, "Logs"),
    logs,
  );
  if (live && model.run.workflowId) {
    loadLogs(logs, model, step, attempts);
    loadServerView(root, model, step);
  } else clear(logs, el("p", { class: "muted" }, "Logs are not part of a recorded history."));
}

function attemptRow(a) {
  const kind = a.kind || a.outcome;
  return el(
    "tr",
    { class: `attempt a-${a.outcome}`, dataset: { outcome: a.outcome, kind, attempt: String(a.n) } },
    el("td", {}, String(a.n)),
    el(
      "td",
      { class: "outcome" },
      el("span", { class: `badge o-${kind}` }, outcomeText(a)),
      a.why ? el("div", { class: `muted cause${a.cause === "killed_by_request" ? " killed" : ""}`, dataset: { cause: a.cause || "" } }, a.why) : null,
      a.error ? el("div", { class: "err" }, `${a.error.type}: ${a.error.message}`) : null,
      a.error && a.error.traceback ? el("details", {}, el("summary", {}, "Traceback"), el("pre", { class: "code" }, a.error.traceback)) : null,
    ),
    el(
      "td",
      { class: "where" },
      el("code", {}, a.worker || "—"),
      el("div", { class: "muted" }, timeEl(a.start), " · ", a.end != null && a.outcome !== "running" ? fmtDur(a.end - a.start) : "running"),
    ),
  );
}

// A reviewer's decision on an uncertain step: who, why, and what the run went on with.
function reviewBox(step) {
  if (step.failReason !== "uncertain") return null;
  if (!step.review) {
    return el(
      "p",
      { class: "banner warn review-note", id: "insp-review", role: "note" },
      "Uncertain: its write may or may not have happened. The run waits for a reviewer: ",
      el("a", { href: `/reviews#${reviewAnchor(step.operationId)}` }, "decide on the Reviews page"),
      ".",
    );
  }
  return el(
    "div",
    { class: `banner decided d-${step.review.decision}`, id: "insp-review", role: "note" },
    el("p", { class: "decision" }, el("b", {}, step.review.text), " ", timeEl(step.review.at)),
    step.review.decision === "approve" ? el("p", { class: "muted" }, "The run used the result the reviewer gave (below) as the step's output.") : null,
  );
}

function output(step) {
  if (step.status === "completed" || step.status === "approved") return el("pre", { class: "code", id: "insp-output" }, json(step.output));
  if (step.error) return el("pre", { class: "code err", id: "insp-output" }, `${step.error.type}: ${step.error.message}`);
  return el("p", { class: "muted", id: "insp-output" }, "No output yet.");
}

function outcomeText(a) {
  switch (a.kind || a.outcome) {
    case "worker_lost":
      return `worker lost${a.worker ? ` (${a.worker})` : ""}`;
    case "timeout":
      return "timed out";
    case "rate_limited":
      return "rate-limited (429)";
    case "non_retryable":
      return "not retried";
    case "released":
      return "handed back";
    default:
      return a.outcome.replace("_", " ");
  }
}

async function loadLogs(box, model, step, attempts) {
  const path = "/api/v1/runs/{workflow_id}/logs";
  if (!(await offers(path))) {
    clear(box, el("p", { class: "muted" }, "This server does not keep logs per step."));
    return;
  }
  clear(box, el("p", { class: "muted" }, "Loading logs…"));
  try {
    const q = new URLSearchParams({ cmd: String(step.cmd) });
    const data = await api(`/api/v1/runs/${enc(model.run.workflowId)}/logs?${q}`);
    const entries = data.logs || data.attempts || [];
    if (!entries.length) {
      clear(box, el("p", { class: "muted" }, "No output was captured for this step."));
      return;
    }
    clear(
      box,
      entries.map((entry) =>
        el(
          "details",
          { open: entry.attempt === attempts.length },
          el("summary", {}, `Attempt ${entry.attempt}${entry.truncated ? " (truncated)" : ""}`),
          el("pre", { class: "code log" }, entry.text ?? entry.output ?? json(entry)),
        ),
      ),
    );
  } catch (error) {
    clear(box, el("p", { class: "error" }, `Logs: ${error.message}`));
  }
}

// The server's own view of the step (GET .../steps): why each attempt ended, who
// killed a worker, and its verdict on a reused output, which win over the history's.
async function loadServerView(root, model, step) {
  if (!(await offers("/api/v1/runs/{workflow_id}/steps"))) return;
  let found = null;
  try {
    const q = new URLSearchParams({ offset: String(step.index), limit: "1" });
    if (model.run.runId) q.set("run_id", model.run.runId);
    const data = await api(`/api/v1/runs/${enc(model.run.workflowId)}/steps?${q}`);
    found = (data.steps || []).find((s) => s.cmd === step.cmd) || null;
  } catch {
    return; // the history's view stays
  }
  if (!found || !root.isConnected || !root.querySelector("#insp-attempts")) return;
  const rows = root.querySelectorAll("#insp-attempts tbody tr.attempt");
  (found.attempts || []).forEach((a, i) => {
    const row = rows[i];
    if (!row) return;
    // Histories recorded before causes were kept: the server's audit log may know.
    if (a.cause === "killed_by_request" && !row.querySelector(".cause")) {
      row.querySelector(".outcome").append(el("div", { class: "muted cause killed" }, a.cause_text || `worker killed on request${a.killed_by ? ` by ${a.killed_by}` : ""}`));
    }
  });
  const note = root.querySelector(".reused");
  if (found.reused_output && !note) {
    root.querySelector("#inspector-title").after(
      el("p", { class: "reused", role: "note" }, "Replacement worker reused the saved output.", el("span", { class: "muted" }, ` ${found.reused_by || "another worker"} took over; this step was not run again.`)),
    );
  } else if (!found.reused_output && note) note.remove();
  showUsage(root, found, rows);
}

// What the step's model calls cost, from the gateway's ledger: the step's sum, and each
// attempt's own (a killed or failed attempt's calls were paid for too).
function showUsage(root, found, rows) {
  root.querySelector("#insp-usage")?.remove();
  if (!found.usage || !found.usage.calls) return;
  const table = root.querySelector("#insp-attempts");
  if (!table) return;
  const title = table.closest(".scroll-x") || table;
  title.before(el("p", { id: "insp-usage", class: "usage" }, `Model calls: ${usageText(found.usage)}`));
  (found.attempts || []).forEach((a, i) => {
    const row = rows[i];
    if (!row || !a.usage || !a.usage.calls || row.querySelector(".attempt-usage")) return;
    row.lastElementChild.append(el("div", { class: "muted attempt-usage", dataset: { attempt: String(a.attempt) } }, usageText(a.usage)));
  });
}
