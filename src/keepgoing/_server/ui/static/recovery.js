// Recovery from the inspector: "Resume from here" on the failed step of a failed or
// cancelled run, "Fork from here" on any step of an ended run (with an input editor
// that checks its JSON). Both post through the session (api() sends the CSRF token)
// and open the new run; a fork also links the Diff page with the pair, once it has
// passed the check of the steps it reuses (a refusal is shown in the form).
import { api, can, el, report, runHref, runPath } from "./api.js";

const ENDED = new Set(["completed", "failed", "cancelled"]);

function goTo(run) {
  window.location.href = runHref(run.workflow_id);
}

function resumeButton(run) {
  const button = el("button", { type: "button", id: "resume-here" }, "Resume from here");
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      goTo((await api(`${runPath(run.workflow_id)}/resume`, { method: "POST", body: {} })).run);
    } catch (error) {
      button.disabled = false;
      report(error, "Resume");
    }
  });
  return button;
}

function forkBox(run, step) {
  const kwargs = run.input && run.input.kwargs && Object.keys(run.input.kwargs).length ? run.input.kwargs : run.input && run.input.args && run.input.args.length ? run.input.args : {};
  const editor = el("textarea", { id: "fork-input", rows: "4", "aria-label": "The fork's input (JSON)" }, JSON.stringify(kwargs, null, 2));
  const problem = el("p", { class: "error", id: "fork-problem", role: "alert" });
  const submit = el("button", { type: "submit", id: "fork-submit" }, `Fork from step ${step.cmd}`);
  const form = el("form", { class: "stack", id: "fork-form" }, editor, problem, submit);
  editor.addEventListener("input", () => {
    try {
      JSON.parse(editor.value);
      problem.textContent = "";
      submit.disabled = false;
    } catch (error) {
      problem.textContent = `Not JSON: ${error.message}`;
      submit.disabled = true;
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let input;
    try {
      input = JSON.parse(editor.value);
    } catch (error) {
      problem.textContent = `Not JSON: ${error.message}`;
      return;
    }
    submit.disabled = true;
    problem.textContent = "Checking the steps the fork reuses…";
    try {
      // Answered once the fork's first activation has replayed the steps it reuses: a
      // step the new input would schedule with other arguments refuses it, said here.
      const body = { from_step: step.cmd, input, wait_for_check: true };
      const found = await api(`${runPath(run.workflow_id)}/fork`, { method: "POST", body });
      const diff = `/diff?a=${encodeURIComponent(run.workflow_id)}&b=${encodeURIComponent(found.run.workflow_id)}`;
      form.replaceWith(el("p", { id: "fork-made" }, "Forked as ", el("a", { href: runHref(found.run.workflow_id), id: "fork-link" }, found.run.workflow_id), " · ", el("a", { href: diff, id: "fork-diff" }, "compare the two")));
    } catch (error) {
      submit.disabled = false;
      problem.textContent = error.message;
    }
  });
  return el("details", { class: "inline-form", id: "fork-here" }, el("summary", {}, "Fork from here"), form);
}

/** The recovery actions for `step` of `run`, or null when none applies. */
export function recoveryBox(run, step) {
  if (!run || !step || !ENDED.has(run.status)) return null;
  const parts = [];
  if (can("runs.resume") && run.status !== "completed" && (step.status === "failed" || run.status === "cancelled")) parts.push(resumeButton(run));
  if (can("runs.fork")) parts.push(forkBox(run, step));
  return parts.length ? el("div", { class: "recovery", id: "recovery" }, el("h3", {}, "Recover"), ...parts) : null;
}
