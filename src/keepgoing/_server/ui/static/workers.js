// Workers: live workers (what they serve, their heartbeat), the workers the store
// marked lost (when and why; no Kill), queues and their depth, the flow-control
// limits with their use. Worker groups and the
// gateway's usage appear once the server offers them.

import { api, can, clear, el, fmtDur, offers, report, timeEl, toast } from "./api.js";
import { fmtCost, fmtTokens } from "./cost.js";

async function load() {
  try {
    const [workers, queues, limits] = await Promise.all([api("/api/v1/workers"), api("/api/v1/queues"), api("/api/v1/limits")]);
    const now = Date.now() / 1000;
    const killable = can("workers.kill") && (await offers("/api/v1/workers/{worker_id}/kill"));
    clear(
      document.getElementById("workers-body"),
      workers.workers.length
        ? workers.workers.map((w) => {
            const age = now - w.heartbeat_at;
            const actions = [];
            if (killable) {
              const button = el("button", { type: "button", class: "small danger", "aria-label": `Kill worker ${w.worker_id}` }, "Kill");
              button.addEventListener("click", async () => {
                if (!confirm(`SIGKILL worker ${w.worker_id} (pid ${w.pid} on ${w.host})? Its attempts are retried elsewhere.`)) return;
                try {
                  await api(`/api/v1/workers/${encodeURIComponent(w.worker_id)}/kill`, { method: "POST", body: { via: "ui" } });
                  toast(`Killed ${w.worker_id}`);
                  load();
                } catch (error) {
                  report(error, "Kill");
                }
              });
              actions.push(button);
            }
            const running = w.info && Array.isArray(w.info.running) ? w.info.running.join(", ") : w.info && w.info.concurrency ? `up to ${w.info.concurrency} at once` : "—";
            return el(
              "tr",
              { dataset: { worker: w.worker_id } },
              el("td", {}, el("code", {}, w.worker_id)),
              el("td", {}, `${w.host} / ${w.pid}`),
              el("td", {}, w.queues.join(", ")),
              el("td", {}, (w.info.workflows || []).join(", ")),
              el("td", { class: age > 5 ? "error" : "", title: "a worker past its heartbeat deadline moves to Lost" }, `${fmtDur(Math.max(0, age))} ago`),
              el("td", {}, running),
              el("td", {}, actions),
            );
          })
        : el("tr", {}, el("td", { colspan: "7", class: "muted" }, "No worker is running. Start one: keepgoing worker app.py")),
    );
    const lost = workers.lost || [];
    clear(
      document.getElementById("lost-body"),
      lost.length
        ? lost.map((w) =>
            el(
              "tr",
              { dataset: { lostWorker: w.worker_id } },
              el("td", {}, el("code", {}, w.worker_id)),
              el("td", {}, `${w.host} / ${w.pid}`),
              el("td", {}, w.queues.join(", ")),
              el("td", {}, timeEl(w.lost_at)),
              el("td", { class: "why" }, w.lost_reason || "—"),
              el("td", {}, timeEl(w.heartbeat_at)),
            ),
          )
        : el("tr", {}, el("td", { colspan: "6", class: "muted" }, "No worker was lost in the last day.")),
    );
    clear(
      document.getElementById("queues-body"),
      queues.queues.map((q) => el("tr", {}, el("td", {}, q.queue), el("td", {}, String(q.runnable_runs ?? "")), el("td", {}, String(q.ready_tasks ?? "")), el("td", {}, String(q.delayed_tasks ?? "")), el("td", {}, String(q.running_tasks ?? "")), el("td", {}, String(q.workers ?? "")))),
    );
    clear(
      document.getElementById("limits-body"),
      limits.limits.length
        ? limits.limits.map((l) =>
            el(
              "tr",
              { dataset: { limit: l.name } },
              el("td", {}, el("code", {}, l.name)),
              el("td", {}, l.concurrency == null ? "—" : `${l.concurrency}${l.keyed ? " per key" : ""}`),
              el("td", {}, l.rate == null ? "—" : `${l.rate}, burst ${l.burst}`),
              el("td", {}, l.concurrency == null ? "—" : `${l.held}${l.keyed ? "" : ` / ${l.concurrency}`}`),
              el("td", {}, String(l.waiting)),
              el("td", {}, l.tokens == null ? "—" : l.tokens.toFixed(1)),
            ),
          )
        : el("tr", {}, el("td", { colspan: "6", class: "muted" }, "No task declares a limit.")),
    );
  } catch (error) {
    clear(document.getElementById("workers-body"), el("tr", {}, el("td", { colspan: "7", class: "error", role: "alert" }, error.message)));
  }
}

// One group: its replicas, its revisions with the runs still on each (pinned runs
// are served by their own revision's workers; a revision with none left is retired).
function groupCard(status) {
  const g = status.group;
  const upgrade = status.settings.upgrade || "pinned";
  const rows = (status.revisions || []).map((r) => {
    const state = r.current ? "current" : r.retired_at ? "retired" : r.open_runs ? `pinned: ${r.open_runs} run(s) stay on it` : "no runs";
    const runs = r.open_runs
      ? el("a", { href: `/?revision=${r.revision}` }, `${r.open_runs} open${r.blocked_runs ? `, ${r.blocked_runs} blocked` : ""}`)
      : "0";
    const live = status.instances.filter((i) => i.state === "running" && i.revision === r.revision).length;
    return el(
      "tr",
      { dataset: { revision: String(r.revision) } },
      el("td", {}, String(r.revision)),
      el("td", {}, state),
      el("td", {}, runs),
      el("td", {}, String(live)),
      el("td", {}, r.upgrade),
    );
  });
  return el(
    "div",
    { class: "group", dataset: { group: g.name } },
    el("h3", {}, g.name, " ", el("small", { class: "muted" }, `${g.task_queue} · ${g.backend} · ${g.replicas} replica(s) wanted · upgrade ${upgrade}`)),
    el(
      "div",
      { class: "scroll-x" },
      el(
        "table",
        { class: "grid revisions" },
        el("thead", {}, el("tr", {}, ...["Revision", "State", "Runs on it", "Replicas", "Upgrade"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, rows),
      ),
    ),
    status.decisions.length ? el("p", { class: "muted" }, `Last decision: ${status.decisions[0].reason}`) : "",
  );
}

async function extras() {
  // Placeholders for parts built separately: shown only when the server has them.
  if (await offers("/api/v1/groups")) {
    document.getElementById("groups").hidden = false;
    try {
      const data = await api("/api/v1/groups");
      const shown = await Promise.all(data.groups.map((g) => api(`/api/v1/groups/${encodeURIComponent(g.group.name)}?decisions=5`)));
      clear(document.getElementById("groups-body"), shown.length ? shown.map(groupCard) : el("p", { class: "muted" }, "No worker group is deployed. Deploy one: keepgoing deploy app.py"));
    } catch (error) {
      clear(document.getElementById("groups-body"), el("p", { class: "error" }, error.message));
    }
  }
  if (can("gateway.read") && (await offers("/api/v1/gateway/usage"))) {
    document.getElementById("gateway").hidden = false;
    try {
      const { totals: t } = await api("/api/v1/gateway/usage?limit=1");
      clear(
        document.getElementById("gateway-body"),
        el("p", { id: "gateway-summary" }, `Last 24 hours: ${t.calls} model call(s), ${fmtTokens(t.tokens)} tokens, ${fmtCost(t.cost)}. `, el("a", { href: "/usage" }, "Usage by model, workflow, run and key →")),
      );
    } catch (error) {
      clear(document.getElementById("gateway-body"), el("p", { class: "error" }, error.message));
    }
  }
}

load();
extras();
// A replacement shows up as soon as it registers; a lost worker moves within a sweep.
setInterval(() => {
  if (!document.hidden) load();
}, 1500);
