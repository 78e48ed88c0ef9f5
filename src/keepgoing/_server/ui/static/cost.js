// Model-call usage as people read it: tokens and US dollars, shared by the timeline,
// the checkpoint inspector and the Usage page.

export function fmtTokens(n) {
  if (n === null || n === undefined) return "—";
  if (n < 10000) return `${n}`;
  if (n < 1e6) return `${(n / 1000).toFixed(n < 1e5 ? 1 : 0)}k`;
  return `${(n / 1e6).toFixed(1)}M`;
}

export function fmtCost(dollars) {
  if (dollars === null || dollars === undefined) return "—";
  if (dollars === 0) return "$0";
  if (dollars < 0.01) return `$${dollars.toFixed(dollars < 0.0001 ? 6 : 4)}`;
  return `$${dollars.toFixed(2)}`;
}

/** "3 calls · 1.2k tokens · $0.0042" for a steps view's `usage` (null: no call). */
export function usageText(usage) {
  if (!usage || !usage.calls) return "";
  const calls = `${usage.calls} call${usage.calls > 1 ? "s" : ""}`;
  return `${calls} · ${fmtTokens(usage.tokens)} tokens · ${fmtCost(usage.cost)}`;
}

/** Every step's usage by cmd, from the server's steps view (runs.read). */
export async function stepUsage(api, path, runId) {
  const found = new Map();
  for (let offset = 0, pages = 0; offset !== null && pages < 20; pages++) {
    const q = new URLSearchParams({ offset: String(offset), limit: "1000" });
    if (runId) q.set("run_id", runId);
    const data = await api(`${path}/steps?${q}`);
    for (const step of data.steps || []) if (step.usage) found.set(step.cmd, step.usage);
    offset = data.next_offset ?? null;
  }
  return found;
}
