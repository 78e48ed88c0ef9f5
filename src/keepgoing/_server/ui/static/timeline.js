// The timeline: a row per step (a bar per attempt) and per wait, virtualized so a
// run of 10,000 events draws only the rows in view; long idle stretches collapse.

import { el, clear, fmtClock, fmtDur } from "./api.js";
import { fmtCost, fmtTokens, usageText } from "./cost.js";
import { bars } from "./model.js";

// Each state: its legend entry, and the glyph its bars and step labels carry. Each kind of
// retry has its own colour and its own shape (kg.css), so none reads as another.
export const STATES = [
  ["completed", "completed", ""],
  ["error", "error, retried", "!"],
  ["non_retryable", "not retried", "⊘"],
  ["rate_limited", "rate-limited (429)", "429"],
  ["timeout", "timed out", "◷"],
  ["worker_lost", "worker lost", "✕"],
  ["released", "handed back", "↩"],
  ["uncertain", "uncertain", "?"],
  ["running", "running", ""],
  ["wait", "waiting", "‖"],
];
const GLYPH = Object.fromEntries(STATES.map(([k, , g]) => [k, g]));

const ROW = 30; // px, fixed: the window of rows in view is computed from scrollTop
const OVERSCAN = 8;
const COLLAPSED_SHARE = 0.03; // each collapsed gap takes this share of the axis

export class Timeline {
  constructor(root, { onSelect, onLosses } = {}) {
    this.root = root;
    this.onSelect = onSelect || (() => {});
    this.onLosses = onLosses || null; // the summary's worker losses lead to the first one
    this.collapse = true;
    this.selected = null;
    this.rows = [];
    this.usage = new Map(); // cmd -> the steps view's usage (model calls' tokens and cost)
    const toggle = el("input", { type: "checkbox", id: "tl-collapse", checked: true });
    toggle.addEventListener("change", () => {
      this.collapse = toggle.checked;
      this.render();
    });
    this.summary = el("span", { class: "muted", id: "tl-summary" });
    this.head = el(
      "div",
      { class: "tl-head" },
      el("label", { for: "tl-collapse", class: "check" }, toggle, " Collapse idle time"),
      this.summary,
      el(
        "ul",
        { class: "legend", id: "tl-legend", "aria-label": "Legend" },
        ...STATES.map(([k, text, glyph]) =>
          el("li", { dataset: { state: k } }, el("span", { class: `swatch bar bar-${k}`, "aria-hidden": "true" }, glyph), ` ${text}`),
        ),
      ),
    );
    this.axis = el("div", { class: "tl-axis", "aria-hidden": "true" });
    this.spacer = el("div", { class: "tl-spacer" });
    this.view = el(
      "div",
      {
        class: "tl-view",
        tabindex: "0",
        role: "listbox",
        "aria-label": "Timeline: steps and waits; arrow keys move, Enter opens the step",
      },
      this.spacer,
    );
    this.view.addEventListener("scroll", () => this.draw());
    this.view.addEventListener("keydown", (event) => this.key(event));
    clear(root, this.head, this.axis, this.view);
    new ResizeObserver(() => this.draw()).observe(this.view);
  }

  /** Show `model` (the server's fold: GET .../model or POST /api/v1/histories/fold); keeps the selection and the scroll position. */
  update(model) {
    this.model = model;
    const rows = [];
    for (const step of model.steps) rows.push({ kind: "step", step, start: step.scheduledAt, id: `step-${step.cmd}` });
    for (const wait of model.waits) rows.push({ kind: "wait", wait, start: wait.start, id: `wait-${wait.kind}-${wait.cmd}` });
    rows.sort((a, b) => a.start - b.start || (a.kind === "wait") - (b.kind === "wait"));
    this.rows = rows;
    this.render();
  }

  /** Show each step's model-call tokens and cost (a Map of cmd -> usage). */
  setUsage(usage) {
    this.usage = usage;
    this.draw();
  }

  render() {
    if (!this.model) return;
    this.scale = makeScale(this.model, this.collapse);
    const losses = this.model.losses.length;
    const lost = `${losses} worker loss${losses > 1 ? "es" : ""}`;
    clear(
      this.summary,
      `${this.model.steps.length} steps · ${this.model.waits.length} waits · ${this.model.eventCount} events`,
      losses ? " · " : null,
      losses && this.onLosses ? el("button", { type: "button", class: "link-button", id: "tl-losses", onclick: () => this.onLosses() }, lost) : losses ? lost : null,
      this.scale.collapsed ? ` · ${this.scale.collapsed} idle gap${this.scale.collapsed > 1 ? "s" : ""} collapsed` : null,
    );
    this.spacer.style.height = `${this.rows.length * ROW}px`;
    this.drawAxis();
    this.draw();
  }

  drawAxis() {
    const nodes = [];
    for (const seg of this.scale.segments) {
      if (seg.collapsed) {
        nodes.push(el("span", { class: "tl-gap", style: `left:${pct(seg.x0)};width:${pct(seg.x1 - seg.x0)}`, title: `idle ${fmtDur(seg.t1 - seg.t0)}` }, `⋯ ${fmtDur(seg.t1 - seg.t0)}`));
      }
    }
    nodes.push(el("span", { class: "tl-tick", style: "left:0" }, fmtClock(this.scale.t0)));
    nodes.push(el("span", { class: "tl-tick end", style: "right:0" }, `+${fmtDur(this.scale.t1 - this.scale.t0)}`));
    clear(this.axis, nodes);
  }

  draw() {
    if (!this.model) return;
    const top = this.view.scrollTop;
    const height = this.view.clientHeight || 400;
    const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    const last = Math.min(this.rows.length, Math.ceil((top + height) / ROW) + OVERSCAN);
    const nodes = [];
    for (let i = first; i < last; i++) nodes.push(this.row(this.rows[i], i));
    clear(this.spacer, nodes);
    if (this.selected) this.view.setAttribute("aria-activedescendant", this.selected);
  }

  row(row, index) {
    const selected = row.id === this.selected;
    const track = el("div", { class: "tl-track" });
    let label;
    if (row.kind === "step") {
      const s = row.step;
      // One mark per kind of failed attempt, with its own glyph and colour: a worker loss
      // never looks like a 429 retry.
      const kinds = new Map();
      for (const a of s.attempts) if (a.kind && a.kind !== "completed") kinds.set(a.kind, (kinds.get(a.kind) || 0) + 1);
      label = el(
        "span",
        { class: "tl-label", title: s.name },
        el("span", { class: `dot s-${s.status}`, "aria-hidden": "true" }),
        `${s.name}`,
        ...[...kinds].map(([kind, n]) => el("span", { class: `retry-mark k-${kind}`, title: `${n} attempt(s): ${kind.replace("_", " ")}`, dataset: { kind } }, ` ${GLYPH[kind] || "↻"}${n > 1 ? `×${n}` : ""}`)),
        usageMark(this.usage.get(s.cmd)),
      );
      // One note per kind, beside its last bar ("429 ×2, retried"): notes never pile up.
      const drawn = bars(s);
      const lastOf = new Map(drawn.map((b, i) => [b.kind || b.outcome, i]));
      drawn.forEach((bar, i) => track.append(...this.bar(bar, s, lastOf.get(bar.kind || bar.outcome) === i ? kinds.get(bar.kind) || 1 : 0)));
    } else {
      const w = row.wait;
      label = el("span", { class: "tl-label wait", title: w.label }, `‖ ${w.label}`);
      const end = w.end ?? w.openEnd ?? w.start;
      const [x0, x1] = [this.scale.x(w.start), this.scale.x(end)];
      track.append(
        el("span", {
          class: `bar bar-wait wait-${w.kind}${w.end === null ? " open" : ""}`,
          style: `left:${pct(x0)};width:${pct(Math.max(x1 - x0, 0.002))}`,
          title: `${w.label}: ${fmtDur(end - w.start)}${w.outcome ? ` (${w.outcome})` : " (waiting)"}`,
        }),
      );
    }
    const node = el(
      "div",
      {
        class: `tl-row${selected ? " selected" : ""}`,
        style: `top:${index * ROW}px`,
        id: row.id,
        role: "option",
        "aria-selected": selected ? "true" : "false",
        dataset: { row: String(index), cmd: row.kind === "step" ? String(row.step.cmd) : "" },
      },
      label,
      track,
    );
    node.addEventListener("click", () => this.select(index, true));
    return node;
  }

  /** A bar, and for an attempt that did not complete a note beside it that says why:
   * a bar of a few pixels has no room for its own label. */
  bar(bar, step, noted = 1) {
    const x0 = this.scale.x(bar.start);
    const x1 = this.scale.x(bar.end ?? bar.start);
    const who = bar.worker ? ` on ${bar.worker}` : "";
    const kind = bar.kind || bar.outcome;
    let text = "";
    if (kind === "worker_lost") text = `${bar.why || "worker lost"}${bar.worker ? ` · ${bar.worker}` : ""}`;
    else if (kind === "timeout") text = "timed out";
    else if (kind === "rate_limited") text = `429${noted > 1 ? ` ×${noted}` : ""}, retried`;
    else if (kind === "error") text = `${bar.error ? bar.error.type.split(".").pop() : "error"}${noted > 1 ? ` ×${noted}` : ""}`;
    else if (kind === "non_retryable") text = `${bar.error ? bar.error.type.split(".").pop() : "error"}, not retried`;
    else if (kind === "uncertain") text = "uncertain: waits for review";
    else if (kind === "released") text = "handed back";
    const title = `${step.name} attempt ${bar.n}${who}: ${bar.why || (bar.error ? `${bar.error.type}: ${bar.error.message}` : kind.replace("_", " "))}, ${fmtDur((bar.end ?? bar.start) - bar.start)}`;
    const node = el(
      "span",
      {
        class: `bar bar-${kind}`,
        style: `left:${pct(x0)};width:${pct(Math.max(x1 - x0, 0.004))}`,
        title,
        dataset: { outcome: bar.outcome, kind, attempt: String(bar.n), worker: bar.worker || "", cause: bar.cause || "" },
      },
      GLYPH[kind] || "",
      text ? el("span", { class: "sr-only" }, ` ${text}`) : null,
    );
    if (!text || !noted) return [node];
    // Beside the bar, on the side with room (the right, unless the bar ends late).
    const right = x1 < 0.7;
    const note = el("span", { class: `bar-note k-${kind}`, style: right ? `left:${pct(x1)}` : `right:${pct(1 - x0)}`, "aria-hidden": "true", title }, text);
    return [node, note];
  }

  key(event) {
    const current = this.rows.findIndex((r) => r.id === this.selected);
    let next = current;
    if (event.key === "ArrowDown") next = Math.min(this.rows.length - 1, current + 1);
    else if (event.key === "ArrowUp") next = Math.max(0, current - 1);
    else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = this.rows.length - 1;
    else if (event.key === "Enter" && current >= 0) {
      this.select(current, true);
      event.preventDefault();
      return;
    } else return;
    event.preventDefault();
    this.select(next, false);
  }

  select(index, open) {
    const row = this.rows[index];
    if (!row) return;
    this.selected = row.id;
    const top = index * ROW;
    if (top < this.view.scrollTop) this.view.scrollTop = top;
    else if (top + ROW > this.view.scrollTop + this.view.clientHeight) this.view.scrollTop = top + ROW - this.view.clientHeight;
    this.draw();
    if (row.kind === "step") this.onSelect(row.step, open);
  }

  /** Select the step with this cmd (e.g. from the URL, a problem, replay); scrolls its
   * row into the middle of the view. False when the run has no such step. */
  selectCmd(cmd, { center = false } = {}) {
    const index = this.rows.findIndex((r) => r.kind === "step" && r.step.cmd === cmd);
    if (index < 0) return false;
    if (center) this.view.scrollTop = Math.max(0, index * ROW - this.view.clientHeight / 2 + ROW / 2);
    this.select(index, true);
    return true;
  }
}

function usageMark(usage) {
  if (!usage || !usage.calls) return null;
  return el("span", { class: "usage-mark", title: usageText(usage) }, ` ${fmtTokens(usage.tokens)} tok · ${fmtCost(usage.cost)}`);
}

function pct(x) {
  return `${(x * 100).toFixed(3)}%`;
}

// Time -> [0, 1]. With `collapse`, a stretch in which no attempt runs that is longer
// than the idle threshold takes a fixed small share of the axis instead of its length.
function makeScale(model, collapse) {
  const spans = [];
  for (const s of model.steps) for (const b of bars(s)) spans.push([b.start, b.end ?? b.start]);
  const t0 = model.first ?? 0;
  const t1 = Math.max(model.last ?? t0, ...spans.map((s) => s[1]), t0 + 0.001);
  const total = t1 - t0;
  const gaps = [];
  if (collapse && spans.length) {
    spans.sort((a, b) => a[0] - b[0]);
    const threshold = Math.max(1, total * 0.05);
    let cursor = t0;
    for (const [a, b] of spans) {
      if (a - cursor > threshold) gaps.push([cursor, a]);
      cursor = Math.max(cursor, b);
    }
    if (t1 - cursor > threshold) gaps.push([cursor, t1]);
  }
  const idle = gaps.reduce((sum, [a, b]) => sum + (b - a), 0);
  const busy = Math.max(total - idle, 1e-6);
  const gapShare = gaps.length ? Math.min(COLLAPSED_SHARE, 0.5 / gaps.length) : 0;
  const busyShare = 1 - gapShare * gaps.length;
  const segments = [];
  let x = 0;
  let cursor = t0;
  for (const [a, b] of gaps) {
    if (a > cursor) {
      const w = ((a - cursor) / busy) * busyShare;
      segments.push({ t0: cursor, t1: a, x0: x, x1: x + w, collapsed: false });
      x += w;
    }
    segments.push({ t0: a, t1: b, x0: x, x1: x + gapShare, collapsed: true });
    x += gapShare;
    cursor = b;
  }
  if (t1 > cursor) segments.push({ t0: cursor, t1, x0: x, x1: 1, collapsed: false });
  const xOf = (t) => {
    if (t <= t0) return 0;
    if (t >= t1) return 1;
    for (const seg of segments) {
      if (t <= seg.t1) return seg.x0 + ((t - seg.t0) / Math.max(seg.t1 - seg.t0, 1e-9)) * (seg.x1 - seg.x0);
    }
    return 1;
  };
  return { t0, t1, x: xOf, segments, collapsed: gaps.length };
}
