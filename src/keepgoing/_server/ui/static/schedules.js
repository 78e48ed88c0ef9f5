// Schedules: each one's spec, next fire times and recent actions (linked to their
// runs), with pause, unpause and trigger buttons for a session that may write them.

import { api, can, clear, el, enc, report, runHref, timeEl, toast } from "./api.js";

const body = document.getElementById("schedules-body");

function act(schedule, what, buttons) {
  return async () => {
    for (const b of buttons) b.disabled = true;
    const path = `/api/v1/schedules/${enc(schedule.schedule_id)}/${what}`;
    try {
      const answer = await api(path, { method: "POST", body: what === "trigger" ? undefined : { note: null } });
      toast(what === "trigger" ? `${answer.status}: ${answer.workflow_id}` : `${schedule.schedule_id}: ${what}d`);
      load();
    } catch (error) {
      report(error, "Schedule");
      for (const b of buttons) b.disabled = false;
    }
  };
}

function controls(schedule) {
  if (!can("schedules.write")) return el("p", { class: "muted" }, "Your session cannot change schedules.");
  const buttons = [];
  const toggle = schedule.paused ? ["unpause", "Unpause", "primary"] : ["pause", "Pause", "secondary"];
  for (const [what, label, kind] of [toggle, ["trigger", "Trigger now", "secondary"]]) {
    const b = el("button", { type: "button", class: kind, dataset: { action: what } }, label);
    buttons.push(b);
  }
  for (const b of buttons) b.addEventListener("click", act(schedule, b.dataset.action, buttons));
  return el("div", { class: "actions" }, buttons);
}

function actions(rows) {
  return el(
    "table",
    { class: "grid" },
    el("thead", {}, el("tr", {}, ...["Slot", "Kind", "Status", "Run", "Reason"].map((h) => el("th", { scope: "col" }, h)))),
    el(
      "tbody",
      {},
      rows.map((a) =>
        el(
          "tr",
          { dataset: { status: a.status } },
          el("td", {}, timeEl(a.slot_at)),
          el("td", {}, a.kind),
          el("td", {}, a.status),
          el("td", {}, a.run_id ? el("a", { href: runHref(a.workflow_id, a.run_id) }, a.workflow_id) : el("code", {}, a.workflow_id)),
          el("td", {}, a.reason || ""),
        ),
      ),
    ),
  );
}

function card(s) {
  const state = s.paused ? `paused${s.note ? ` (${s.note})` : ""}` : "active";
  return el(
    "article",
    { class: "card schedule", dataset: { schedule: s.schedule_id, paused: String(s.paused) } },
    el("h2", {}, el("code", {}, s.schedule_id)),
    el(
      "dl",
      { class: "facts" },
      el("dt", {}, "Starts"),
      el("dd", {}, `${s.workflow} on ${s.task_queue}`),
      el("dt", {}, "When"),
      el("dd", {}, `${s.description}; overlap ${s.overlap}`),
      el("dt", {}, "State"),
      el("dd", { class: "schedule-state" }, state),
      el("dt", {}, "Next fire times"),
      el("dd", { class: "next-fires" }, s.next_fire_times.length ? el("ul", {}, s.next_fire_times.map((t) => el("li", {}, timeEl(t)))) : "—"),
    ),
    controls(s),
    el("h3", {}, "Recent actions"),
    s.recent_actions.length ? actions(s.recent_actions) : el("p", { class: "muted" }, "No slot has fired yet."),
  );
}

let busy = false;
async function load() {
  if (busy) return;
  busy = true;
  try {
    const found = await api("/api/v1/schedules");
    clear(body, found.schedules.length ? found.schedules.map(card) : el("p", { class: "muted", id: "no-schedules" }, "No schedule yet: create one with keepgoing schedules create or Client.create_schedule."));
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
