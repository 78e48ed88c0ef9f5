// Diff two runs side by side: inputs, steps (matched by position and name),
// outputs and timings.

import { api, clear, el, fmtDur, json, page, runHref, runPath, statusBadge } from "./api.js";
import { buildModel, stepDuration } from "./model.js";

const form = document.getElementById("diff-form");
const out = document.getElementById("diff-out");

async function fetchRun(id) {
  const [run, history] = await Promise.all([api(runPath(id)), api(`${runPath(id)}/history`)]);
  return { run, model: buildModel(history.events) };
}

function same(a, b) {
  return json(a, 0) === json(b, 0);
}

function cell(value, differs, id) {
  return el("td", { class: differs ? "differs" : "same" }, el("pre", { class: "code", id }, typeof value === "string" ? value : json(value)));
}

function compare(a, b) {
  const rows = [];
  const n = Math.max(a.model.steps.length, b.model.steps.length);
  for (let i = 0; i < n; i++) {
    const x = a.model.steps[i];
    const y = b.model.steps[i];
    const name = (s) => (s ? s.name : "—");
    const attempts = (s) => (s ? String(s.attempts.length) : "—");
    const dur = (s) => (s ? fmtDur(stepDuration(s)) : "—");
    const output = (s) => (s ? (s.status === "completed" ? json(s.output, 0) : s.status) : "—");
    const inputs = (s) => (s ? json({ args: s.args, kwargs: s.kwargs }, 0) : "—");
    const differs = !x || !y || x.name !== y.name || inputs(x) !== inputs(y) || output(x) !== output(y) || x.attempts.length !== y.attempts.length;
    rows.push(
      el(
        "tr",
        { class: differs ? "differs" : "", dataset: { step: String(i + 1), differs: differs ? "yes" : "no" } },
        el("th", { scope: "row" }, String(i + 1)),
        el("td", {}, name(x), x ? el("div", { class: "muted" }, `${attempts(x)} attempt(s) · ${dur(x)}`) : null, x ? el("code", { class: "small" }, inputs(x)) : null, el("div", {}, "→ ", el("code", {}, output(x)))),
        el("td", {}, name(y), y ? el("div", { class: "muted" }, `${attempts(y)} attempt(s) · ${dur(y)}`) : null, y ? el("code", { class: "small" }, inputs(y)) : null, el("div", {}, "→ ", el("code", {}, output(y)))),
        el("td", {}, x && y && stepDuration(x) != null && stepDuration(y) != null ? signed(stepDuration(y) - stepDuration(x)) : "—"),
      ),
    );
  }
  const total = (r) => (r.run.ended_at ? r.run.ended_at - r.run.created_at : null);
  const differing = rows.filter((r) => r.dataset.differs === "yes").length;
  clear(
    out,
    el(
      "section",
      { class: "card" },
      el("h2", {}, "Summary"),
      el("p", { id: "diff-summary" }, `${differing} of ${n} steps differ. Inputs ${same(a.run.input, b.run.input) ? "are the same" : "differ"}; results ${same(a.run.result, b.run.result) ? "are the same" : "differ"}.`),
      el(
        "table",
        { class: "grid", id: "diff-runs" },
        el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", { scope: "col" }, "A"), el("th", { scope: "col" }, "B"))),
        el(
          "tbody",
          {},
          el("tr", {}, el("th", { scope: "row" }, "Run"), el("td", {}, el("a", { href: runHref(a.run.workflow_id) }, a.run.workflow_id), " ", statusBadge(a.run.status)), el("td", {}, el("a", { href: runHref(b.run.workflow_id) }, b.run.workflow_id), " ", statusBadge(b.run.status))),
          el("tr", {}, el("th", { scope: "row" }, "Workflow"), el("td", {}, a.run.workflow_name), el("td", {}, b.run.workflow_name)),
          el("tr", {}, el("th", { scope: "row" }, "Input"), cell(a.run.input, !same(a.run.input, b.run.input), "diff-input-a"), cell(b.run.input, !same(a.run.input, b.run.input), "diff-input-b")),
          el("tr", {}, el("th", { scope: "row" }, "Output"), cell(a.run.status === "completed" ? a.run.result : a.run.status, !same(a.run.result, b.run.result), "diff-output-a"), cell(b.run.status === "completed" ? b.run.result : b.run.status, !same(a.run.result, b.run.result), "diff-output-b")),
          el("tr", {}, el("th", { scope: "row" }, "Duration"), el("td", {}, fmtDur(total(a))), el("td", {}, fmtDur(total(b)))),
        ),
      ),
    ),
    el(
      "section",
      { class: "card" },
      el("h2", {}, "Steps"),
      el(
        "div",
        { class: "scroll-x" },
        el("table", { class: "grid", id: "diff-steps" }, el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "#"), el("th", { scope: "col" }, "A"), el("th", { scope: "col" }, "B"), el("th", { scope: "col" }, "B − A"))), el("tbody", {}, rows)),
      ),
    ),
  );
}

function signed(seconds) {
  return `${seconds >= 0 ? "+" : "−"}${fmtDur(Math.abs(seconds))}`;
}

async function run() {
  const a = document.getElementById("diff-a").value.trim();
  const b = document.getElementById("diff-b").value.trim();
  history.replaceState(null, "", `/diff?${new URLSearchParams({ a, b })}`);
  clear(out, el("p", { class: "muted" }, "Loading…"));
  try {
    const [x, y] = await Promise.all([fetchRun(a), fetchRun(b)]);
    compare(x, y);
  } catch (error) {
    clear(out, el("p", { class: "error", role: "alert" }, error.message));
  }
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  run();
});
if (page().page.a && page().page.b) run();
