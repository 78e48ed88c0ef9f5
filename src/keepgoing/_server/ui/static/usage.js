// The Usage page: the model gateway's ledger (GET /api/v1/gateway/usage, permission
// gateway.read): totals, a chart over time, a table by model, workflow, run, step or
// key, and each gateway key's budgets with what is left of them.

import { api, clear, el, fmtDur, fmtTime } from "./api.js";
import { fmtCost, fmtTokens } from "./cost.js";

const form = document.getElementById("usage-form");
const measure = document.getElementById("u-measure");
const LABELS = { model: "Model", workflow: "Workflow", run: "Run", step: "Step", key: "Key" };
const state = { asked: 0, data: null };

for (const [key, value] of new URLSearchParams(location.search)) {
  const field = form.elements.namedItem(key);
  if (field) field.value = value;
}

async function load() {
  const fields = new FormData(form);
  const now = Date.now() / 1000;
  const q = new URLSearchParams({
    since: String(Math.floor(now - Number(fields.get("range") || 86400))),
    group_by: String(fields.get("group_by") || "model"),
  });
  for (const key of ["workflow", "run_id", "model"]) {
    const value = String(fields.get(key) || "").trim();
    if (value) q.set(key, value);
  }
  const error = document.getElementById("usage-error");
  const asked = ++state.asked; // only the newest answer draws
  try {
    const data = await api(`/api/v1/gateway/usage?${q}`);
    if (asked !== state.asked) return;
    error.hidden = true;
    // A free model (the scripted one) costs nothing: chart its tokens instead.
    if (!state.data && !state.measured && data.totals.cost === 0 && data.totals.calls) measure.value = "tokens";
    state.data = data;
    draw(data);
  } catch (failure) {
    if (asked !== state.asked) return;
    error.hidden = false;
    error.textContent =
      failure.status === 403 ? "Reading usage needs a token with the gateway.read permission." : failure.message;
  }
}

function draw(data) {
  const t = data.totals;
  clear(
    document.getElementById("usage-totals"),
    total("Calls", String(t.calls), "usage-calls"),
    total("Tokens", `${fmtTokens(t.tokens)} (${fmtTokens(t.input_tokens)} in, ${fmtTokens(t.output_tokens)} out)`, "usage-tokens"),
    total("Cost", fmtCost(t.cost), "usage-cost"),
    total("Latency", t.latency_avg == null ? "—" : `${fmtDur(t.latency_avg)} avg, ${fmtDur(t.latency_max)} max`, "usage-latency"),
    total("Errors", `${t.errors} failed, ${t.refused} refused`, "usage-errors"),
  );
  chart(data);
  groups(data);
  keys(data.keys);
}

function total(label, value, id) {
  return el("div", { class: "total", id }, el("span", { class: "muted" }, label), el("b", {}, value));
}

function chart(data) {
  const box = document.getElementById("usage-chart");
  const kind = measure.value;
  const value = (p) => (kind === "tokens" ? p.input_tokens + p.output_tokens : p[kind]);
  document.getElementById("usage-bucket").textContent = data.bucket ? ` per ${fmtDur(data.bucket)}` : "";
  if (!data.series.length) {
    clear(box, el("p", { class: "muted" }, "No model calls in this range."));
    return;
  }
  // One column per bucket of the range, so quiet stretches show as gaps.
  const count = Math.min(600, Math.max(1, Math.ceil((data.until - data.since) / data.bucket)));
  const byBucket = new Map(data.series.map((p) => [Math.round((p.at - data.since) / data.bucket), p]));
  const top = Math.max(...data.series.map(value), 1e-12);
  const columns = [];
  for (let i = 0; i < count; i++) {
    const point = byBucket.get(i);
    const v = point ? value(point) : 0;
    const shown = kind === "cost" ? fmtCost(v) : kind === "tokens" ? `${fmtTokens(v)} tokens` : `${v} calls`;
    columns.push(
      el("span", {
        class: `col${point ? "" : " empty"}`,
        style: `height:${((v / top) * 100).toFixed(2)}%`,
        title: `${fmtTime(data.since + i * data.bucket)}: ${shown}`,
        dataset: point ? { at: String(point.at), value: String(v) } : {},
      }),
    );
  }
  box.setAttribute("aria-label", `${kind} over time, ${data.series.length} bucket(s) with calls; highest ${kind === "cost" ? fmtCost(top) : top}`);
  clear(box, columns);
}

function groups(data) {
  document.getElementById("usage-by").textContent = LABELS[data.group_by].toLowerCase();
  document.getElementById("usage-key-head").textContent = LABELS[data.group_by];
  const names = new Map((data.keys || []).map((k) => [k.token_id, k.name]));
  const body = document.getElementById("usage-groups-body");
  clear(
    body,
    data.groups.length
      ? data.groups.map((g) =>
          el(
            "tr",
            { dataset: { key: keyOf(g, data.group_by) } },
            el("td", {}, label(g, data.group_by, names)),
            el("td", {}, String(g.calls)),
            el("td", {}, g.errors || g.refused ? `${g.errors} / ${g.refused} refused` : "0"),
            el("td", {}, fmtTokens(g.input_tokens)),
            el("td", {}, fmtTokens(g.output_tokens)),
            el("td", { class: "cost" }, fmtCost(g.cost)),
            el("td", {}, g.latency_avg == null ? "—" : fmtDur(g.latency_avg)),
            el("td", {}, fmtDur(g.latency_max)),
          ),
        )
      : el("tr", {}, el("td", { colspan: "8", class: "muted" }, "No model calls in this range.")),
  );
}

function keyOf(g, by) {
  if (by === "model") return g.model ?? "";
  if (by === "workflow") return g.workflow ?? "";
  if (by === "key") return g.key_id ?? "";
  if (by === "step") return `${g.run_id ?? ""}#${g.step ?? ""}`;
  return g.run_id ?? "";
}

function label(g, by, names) {
  if (by === "model") return g.model ?? "—";
  if (by === "workflow") return g.workflow ?? el("span", { class: "muted" }, "outside any run");
  if (by === "key") return g.key_id ? `${names.get(g.key_id) || "key"} (${g.key_id})` : el("span", { class: "muted" }, "no key (in-process)");
  if (!g.run_id) return el("span", { class: "muted" }, "outside any run");
  const text = by === "step" ? `${g.workflow ?? ""} ${g.run_id.slice(0, 12)} step ${g.step}` : `${g.workflow ?? ""} ${g.run_id.slice(0, 12)}`;
  // The run page finds a run by its run id alone (it redirects to the workflow's).
  const step = by === "step" && g.step != null ? `&step=${g.step}` : "";
  return el("a", { href: `/run?run=${encodeURIComponent(g.run_id)}${step}` }, text);
}

function keys(list) {
  const body = document.getElementById("usage-keys-body");
  clear(
    body,
    list.length
      ? list.map((k) =>
          el(
            "tr",
            { dataset: { token: k.token_id }, class: k.active ? "" : "muted" },
            el("td", {}, `${k.name} `, el("code", {}, k.token_id), k.active ? null : " (revoked)"),
            el("td", {}, `${fmtCost(k.spent_today)}${k.daily_budget == null ? "" : ` of ${fmtCost(k.daily_budget)}`}`),
            el("td", { class: "left-today" }, k.left_today == null ? "no budget" : fmtCost(k.left_today)),
            el("td", {}, `${fmtCost(k.spent_total)}${k.total_budget == null ? "" : ` of ${fmtCost(k.total_budget)}`}`),
            el("td", { class: "left-total" }, k.left_total == null ? "no budget" : fmtCost(k.left_total)),
            el("td", {}, [k.requests_per_minute == null ? null : `${k.requests_per_minute} req/min`, k.tokens_per_minute == null ? null : `${k.tokens_per_minute} tokens/min`].filter(Boolean).join(", ") || "—"),
          ),
        )
      : el("tr", {}, el("td", { colspan: "6", class: "muted" }, "No gateway keys: create one with keepgoing gateway keys create.")),
  );
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  history.replaceState(null, "", `?${new URLSearchParams(new FormData(form))}`);
  load();
});
measure.addEventListener("change", () => {
  state.measured = true;
  if (state.data) chart(state.data);
});
load();
