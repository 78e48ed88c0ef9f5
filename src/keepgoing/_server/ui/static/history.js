// A run's history, compact (one line per event, each with its full time to the
// millisecond: many events share a second) or as JSON, filtered by text or event
// type, shown a page at a time so 10,000 events cost one page of DOM.

import { el, clear, fmtFull, json, short } from "./api.js";

const PAGE = 200;

export class HistoryView {
  constructor(root) {
    this.root = root;
    this.events = [];
    this.pageNo = 0;
    this.mode = "compact";
    this.filter = el("input", { type: "search", id: "hist-filter", placeholder: "type, step name, worker, text…", "aria-label": "Filter the history" });
    this.filter.addEventListener("input", () => {
      this.pageNo = 0;
      this.render();
    });
    const modes = el("div", { class: "seg", role: "group", "aria-label": "History view" });
    for (const mode of ["compact", "json"]) {
      const button = el("button", { type: "button", "aria-pressed": mode === this.mode ? "true" : "false", dataset: { mode } }, mode === "json" ? "JSON" : "Compact");
      button.addEventListener("click", () => {
        this.mode = mode;
        for (const b of modes.children) b.setAttribute("aria-pressed", b.dataset.mode === mode ? "true" : "false");
        this.render();
      });
      modes.append(button);
    }
    this.pager = el("div", { class: "pager" });
    this.body = el("div", { class: "hist-body", id: "hist-body" });
    clear(root, el("div", { class: "toolbar" }, el("label", { for: "hist-filter" }, "Filter"), this.filter, modes), this.body, this.pager);
  }

  update(events) {
    this.events = events;
    this.render();
  }

  matches() {
    const needle = this.filter.value.trim().toLowerCase();
    if (!needle) return this.events;
    return this.events.filter((e) => JSON.stringify(e).toLowerCase().includes(needle));
  }

  render() {
    const found = this.matches();
    const pages = Math.max(1, Math.ceil(found.length / PAGE));
    this.pageNo = Math.min(this.pageNo, pages - 1);
    const slice = found.slice(this.pageNo * PAGE, (this.pageNo + 1) * PAGE);
    if (this.mode === "json") {
      clear(this.body, el("pre", { class: "code" }, slice.map((e) => JSON.stringify(e)).join("\n")));
    } else {
      clear(
        this.body,
        el(
          "div",
          { class: "scroll-x" },
          el(
          "table",
          { class: "grid compact" },
          el("thead", {}, el("tr", {}, ...["Seq", "Time", "Event", "Detail"].map((h) => el("th", { scope: "col" }, h)))),
          el("tbody", {}, slice.map((e) => el("tr", { class: `ev-${e.type}` }, el("td", {}, String(e.seq)), el("td", { class: "ts" }, fmtFull(e.at)), el("td", {}, e.type), el("td", {}, detail(e))))),
          ),
        ),
      );
    }
    const prev = el("button", { type: "button", disabled: this.pageNo === 0 }, "← Previous page");
    const next = el("button", { type: "button", disabled: this.pageNo >= pages - 1 }, "Next page →");
    prev.addEventListener("click", () => {
      this.pageNo -= 1;
      this.render();
    });
    next.addEventListener("click", () => {
      this.pageNo += 1;
      this.render();
    });
    clear(this.pager, prev, el("span", { class: "muted" }, `${found.length} of ${this.events.length} events · page ${this.pageNo + 1} of ${pages}`), next);
  }
}

function detail(e) {
  switch (e.type) {
    case "WorkflowStarted":
      return `${e.workflow_name} ${short(e.input)}`;
    case "TaskScheduled":
      return `#${e.cmd} ${e.name}(${short(e.args, 60)})`;
    case "TaskCompleted":
      return `#${e.cmd} attempt ${e.attempt} on ${e.worker || "?"} → ${short(e.result, 60)}`;
    case "TaskAttemptFailed":
      return `#${e.cmd} ${e.name} attempt ${e.attempt} ${e.reason}${e.worker ? ` (${e.worker})` : ""}: ${e.error.message}`;
    case "TaskFailed":
      return `#${e.cmd} ${e.name} after ${e.attempts} attempts: ${e.error.message}`;
    case "ActivationCompleted":
      return `saw ${e.saw_upto} on ${e.worker || "?"}`;
    case "MessageReceived":
      return `${e.name} from ${e.sender_kind} ${e.sender_id}: ${short(e.payload, 60)}`;
    case "MemoryCommitted":
      return `${e.volume} v${e.version} by #${e.cmd} attempt ${e.attempt}: ${e.paths.join(", ")}`;
    case "WorkflowBlocked":
      return short(e.reason, 120);
    default: {
      const rest = { ...e };
      delete rest.type;
      delete rest.seq;
      delete rest.at;
      return short(json(rest, 0), 120);
    }
  }
}
