// Reviews: operations waiting for a reviewer, with their evidence and the decision.

import { api, can, clear, el, enc, json, report, reviewAnchor, runHref, timeEl, toast } from "./api.js";

const body = document.getElementById("reviews-body");
const drafts = new Map(); // operation id -> what the reviewer typed, kept across refreshes

function attempts(rows) {
  return el(
    "table",
    { class: "grid" },
    el("thead", {}, el("tr", {}, ...["Attempt", "Worker", "Ended", "Outcome", "Error"].map((h) => el("th", { scope: "col" }, h)))),
    el(
      "tbody",
      {},
      rows.map((a) => el("tr", {}, el("td", {}, String(a.attempt)), el("td", {}, el("code", {}, a.worker || "—")), el("td", {}, timeEl(a.ended_at)), el("td", {}, a.outcome), el("td", {}, a.error ? a.error.message : ""))),
    ),
  );
}

function decide(op, form) {
  return async (decision) => {
    const draft = drafts.get(op.operation_id) || {};
    const request = { decision, reason: draft.reason || null };
    if (decision === "approve") {
      try {
        request.result = draft.result ? JSON.parse(draft.result) : null;
      } catch (error) {
        toast(`The result is not JSON: ${error.message}`, "error");
        return;
      }
    }
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    try {
      await api(`/api/v1/operations/${enc(op.operation_id)}/review`, { method: "POST", body: request });
      drafts.delete(op.operation_id);
      toast(`Sent ${decision} for ${op.operation_id}; the run carries on`);
      load();
    } catch (error) {
      report(error, "Review");
      for (const b of form.querySelectorAll("button")) b.disabled = false;
    }
  };
}

function controls(op) {
  const draft = drafts.get(op.operation_id) || { result: "", reason: "" };
  drafts.set(op.operation_id, draft);
  const id = op.operation_id.replace(/[^A-Za-z0-9_-]/g, "_");
  const result = el("textarea", { id: `result-${id}`, class: "review-result", rows: "3", spellcheck: "false", placeholder: '{"version": 7}' });
  result.value = draft.result;
  result.addEventListener("input", () => (draft.result = result.value));
  const reason = el("input", { id: `reason-${id}`, class: "review-reason", type: "text", maxlength: "2000", placeholder: "What you checked" });
  reason.value = draft.reason;
  reason.addEventListener("input", () => (draft.reason = reason.value));
  const form = el(
    "form",
    { class: "review-form", "aria-label": `Decide ${op.operation_id}` },
    el("label", { for: `result-${id}` }, "Result to approve (JSON: what the other system shows)"),
    result,
    el("label", { for: `reason-${id}` }, "Reason"),
    reason,
  );
  const send = decide(op, form);
  const buttons = [
    ["approve", "Approve", "primary"],
    ["retry", "Retry", "secondary"],
    ["fail", "Fail", "danger"],
  ].map(([decision, label, kind]) => {
    const b = el("button", { type: "button", class: kind, dataset: { decision } }, label);
    b.addEventListener("click", () => send(decision));
    return b;
  });
  form.append(el("div", { class: "actions" }, buttons));
  form.addEventListener("submit", (event) => event.preventDefault());
  return form;
}

function card(op) {
  const evidence = op.evidence || {};
  const error = evidence.error || op.error || {};
  return el(
    "article",
    { class: "card review", id: reviewAnchor(op.operation_id), dataset: { operation: op.operation_id, workflowId: op.workflow_id } },
    el("h2", {}, el("code", {}, op.operation_id)),
    el(
      "dl",
      { class: "facts" },
      el("dt", {}, "Run"),
      el("dd", {}, el("a", { href: runHref(op.workflow_id, op.run_id) }, op.workflow_id)),
      el("dt", {}, "Step"),
      el("dd", {}, `${op.task} (step ${op.cmd}${op.rounds.length > 1 ? `, round ${op.rounds.length}` : ""})`),
      el("dt", {}, "Since"),
      el("dd", {}, timeEl(op.updated_at)),
    ),
    el("h3", {}, "Evidence"),
    el("p", { class: "evidence" }, error.message || "—"),
    el("details", { open: true }, el("summary", {}, "What the step sent (its inputs)"), el("pre", { class: "code evidence-inputs" }, json(evidence.inputs))),
    el("details", {}, el("summary", {}, `Attempts (${(evidence.attempts || []).length})`), attempts(evidence.attempts || [])),
    evidence.logs ? el("details", { open: true }, el("summary", {}, "What the attempt printed"), el("pre", { class: "code evidence-logs" }, evidence.logs)) : null,
    op.reviews.length ? el("p", { class: "muted" }, `Earlier decisions: ${op.reviews.map((r) => `${r.decision} by ${r.sender_id}`).join(", ")}`) : null,
    can("messages.send") ? controls(op) : el("p", { class: "muted" }, "Your token cannot send messages, so it cannot decide."),
  );
}

let busy = false;
let shown = false;
async function load() {
  if (busy) return;
  busy = true;
  try {
    const found = await api("/api/v1/reviews");
    const focused = document.activeElement && body.contains(document.activeElement) ? document.activeElement.id : null;
    clear(body, found.operations.length ? found.operations.map(card) : el("p", { class: "muted", id: "no-reviews" }, "No run is waiting for review."));
    if (focused) document.getElementById(focused)?.focus();
    else if (!shown && location.hash) {
      // Opened from a run's banner: bring its operation's card into view once.
      shown = true;
      const target = document.getElementById(location.hash.slice(1));
      if (target) {
        target.classList.add("target");
        target.scrollIntoView({ block: "start" });
      }
    }
  } catch (error) {
    clear(body, el("p", { class: "error", role: "alert" }, error.message));
  } finally {
    busy = false;
  }
}

load();
setInterval(() => {
  if (!document.hidden && !body.contains(document.activeElement)) load();
}, 2000);
