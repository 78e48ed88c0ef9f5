// Diff two runs side by side: inputs, steps (matched by position and name), outputs and
// timings. Only the differences by default, with the fields that differ marked; a
// picker finds the runs (by id, name or text), and a run's "Compare with…" opens it
// with the runs of the same workflow to choose from.

import { api, clear, el, fmtDur, json, page, runBadge, runHref, runPath, timeEl } from "./api.js";
import { runModel } from "./model.js";

const form = document.getElementById("diff-form");
const out = document.getElementById("diff-out");
const only = document.getElementById("only-diff");
const options = document.getElementById("run-options");
const inputs = [document.getElementById("diff-a"), document.getElementById("diff-b")];

async function fetchRun(id) {
  const [run, model] = await Promise.all([api(runPath(id)), runModel(id)]);
  return { run, model };
}

function same(a, b) {
  return json(a, 0) === json(b, 0);
}

function cell(value, differs, id) {
  return el("td", { class: differs ? "differs changed" : "same" }, el("pre", { class: "code", id }, typeof value === "string" ? value : json(value)));
}

// One field of a step, marked when the other run's differs.
function field(label, text, changed, code = false) {
  return el(
    "div",
    { class: `field${changed ? " changed" : ""}`, dataset: { field: label } },
    changed ? el("span", { class: "change-mark", title: `${label} differs` }, "≠ ") : null,
    el("span", { class: "field-name" }, `${label}: `),
    code ? el("code", {}, text) : text,
  );
}

function compare(a, b) {
  const rows = [];
  const n = Math.max(a.model.steps.length, b.model.steps.length);
  const name = (s) => (s ? s.name : "—");
  const attempts = (s) => (s ? String(s.attempts.length) : "—");
  const output = (s) => (s ? (s.status === "completed" ? json(s.output, 0) : s.status) : "—");
  const inputsOf = (s) => (s ? json({ args: s.args, kwargs: s.kwargs }, 0) : "—");
  for (let i = 0; i < n; i++) {
    const x = a.model.steps[i];
    const y = b.model.steps[i];
    const changed = {
      name: name(x) !== name(y),
      inputs: inputsOf(x) !== inputsOf(y),
      output: output(x) !== output(y),
      attempts: attempts(x) !== attempts(y),
    };
    const differs = !x || !y || Object.values(changed).some(Boolean);
    const side = (s) =>
      s
        ? el(
            "td",
            {},
            field("step", s.name, changed.name),
            field("attempts", `${attempts(s)} · ${fmtDur(s.duration)}`, changed.attempts),
            field("inputs", inputsOf(s), changed.inputs, true),
            field("output", output(s), changed.output, true),
          )
        : el("td", { class: "muted" }, "no such step");
    rows.push(
      el(
        "tr",
        { class: differs ? "differs" : "same-row", dataset: { step: String(i + 1), differs: differs ? "yes" : "no" } },
        el("th", { scope: "row" }, String(i + 1)),
        side(x),
        side(y),
        el("td", {}, x && y && x.duration != null && y.duration != null ? signed(y.duration - x.duration) : "—"),
      ),
    );
  }
  const total = (r) => (r.run.ended_at ? r.run.ended_at - r.run.created_at : null);
  const differing = rows.filter((r) => r.dataset.differs === "yes").length;
  const steps = el("table", { class: "grid diff", id: "diff-steps" }, el("colgroup", {}, el("col", { class: "c-n" }), el("col", {}), el("col", {}), el("col", { class: "c-d" })), el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "#"), el("th", { scope: "col" }, "A"), el("th", { scope: "col" }, "B"), el("th", { scope: "col" }, "B − A"))), el("tbody", {}, rows));
  const hidden = el("p", { class: "muted", id: "diff-hidden" });
  const filter = () => {
    steps.classList.toggle("only-diff", only.checked);
    const same = n - differing;
    hidden.textContent = only.checked && same ? `${same} identical step${same > 1 ? "s" : ""} hidden; clear "Only differences" to see every step.` : "";
  };
  only.onchange = filter;
  filter();
  const inputDiffers = !same(a.run.input, b.run.input);
  const resultDiffers = !same(a.run.result, b.run.result);
  clear(
    out,
    el(
      "section",
      { class: "card" },
      el("h2", {}, "Summary"),
      el("p", { id: "diff-summary" }, `${differing} of ${n} steps differ. Inputs ${inputDiffers ? "differ" : "are the same"}; results ${resultDiffers ? "differ" : "are the same"}.`),
      el(
        "table",
        { class: "grid diff", id: "diff-runs" },
        el("colgroup", {}, el("col", { class: "c-n" }), el("col", {}), el("col", {})),
        el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", { scope: "col" }, "A"), el("th", { scope: "col" }, "B"))),
        el(
          "tbody",
          {},
          el("tr", {}, el("th", { scope: "row" }, "Run"), el("td", {}, el("a", { href: runHref(a.run.workflow_id) }, a.run.workflow_id), " ", runBadge(a.run)), el("td", {}, el("a", { href: runHref(b.run.workflow_id) }, b.run.workflow_id), " ", runBadge(b.run))),
          el("tr", { class: a.run.workflow_name !== b.run.workflow_name ? "differs" : "" }, el("th", { scope: "row" }, "Workflow"), el("td", {}, a.run.workflow_name), el("td", {}, b.run.workflow_name)),
          el("tr", {}, el("th", { scope: "row" }, "Input"), cell(a.run.input, inputDiffers, "diff-input-a"), cell(b.run.input, inputDiffers, "diff-input-b")),
          el("tr", {}, el("th", { scope: "row" }, "Output"), cell(a.run.status === "completed" ? a.run.result : a.run.status, resultDiffers, "diff-output-a"), cell(b.run.status === "completed" ? b.run.result : b.run.status, resultDiffers, "diff-output-b")),
          el("tr", {}, el("th", { scope: "row" }, "Duration"), el("td", {}, fmtDur(total(a))), el("td", {}, fmtDur(total(b)))),
        ),
      ),
    ),
    el("section", { class: "card" }, el("h2", {}, "Steps"), hidden, steps),
  );
}

function signed(seconds) {
  return `${seconds >= 0 ? "+" : "−"}${fmtDur(Math.abs(seconds))}`;
}

async function run() {
  const [a, b] = inputs.map((i) => i.value.trim());
  history.replaceState(null, "", `/diff?${new URLSearchParams({ a, b })}`);
  document.getElementById("picker").hidden = true;
  clear(out, el("p", { class: "muted" }, "Loading…"));
  try {
    const [x, y] = await Promise.all([fetchRun(a), fetchRun(b)]);
    compare(x, y);
  } catch (error) {
    clear(out, el("p", { class: "error", role: "alert" }, error.message));
  }
}

// -- the run picker ---------------------------------------------------------------------
async function runsLike(text, workflow) {
  const q = new URLSearchParams({ limit: "20" });
  if (text) q.set("q", text);
  if (workflow) q.set("workflow", workflow);
  try {
    return (await api(`/api/v1/runs?${q}`)).runs;
  } catch {
    return [];
  }
}

let typed = null;
function suggest(input) {
  clearTimeout(typed);
  typed = setTimeout(async () => {
    const runs = await runsLike(input.value.trim());
    clear(options, runs.map((r) => el("option", { value: r.workflow_id }, `${r.workflow_name} · ${r.state || r.status}`)));
  }, 200);
}
for (const input of inputs) {
  input.addEventListener("focus", () => suggest(input));
  input.addEventListener("input", () => suggest(input));
}

// "Compare with…" from a run's page: A is set; offer the runs of its workflow as B.
async function pickB(a) {
  let base;
  try {
    base = await api(runPath(a));
  } catch (error) {
    clear(out, el("p", { class: "error", role: "alert" }, error.message));
    return;
  }
  const runs = (await runsLike("", base.workflow_name)).filter((r) => r.run_id !== base.run_id);
  const box = document.getElementById("picker");
  box.hidden = false;
  document.getElementById("picker-note").textContent = runs.length
    ? `Runs of ${base.workflow_name}, newest first. Or type any run's id above.`
    : `No other run of ${base.workflow_name}: type any run's id above.`;
  clear(
    document.getElementById("picks"),
    runs.map((r) => {
      const button = el("button", { type: "button", class: "link-button pick", dataset: { workflowId: r.workflow_id } }, r.workflow_id);
      button.addEventListener("click", () => {
        inputs[1].value = r.workflow_id;
        run();
      });
      return el("li", {}, button, " ", runBadge(r), " ", timeEl(r.created_at));
    }),
  );
  inputs[1].focus();
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  run();
});
const { a, b } = page().page;
if (a && b) run();
else if (a) pickB(a);
