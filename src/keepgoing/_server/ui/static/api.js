// The API from the browser: the session cookie authenticates, and every change
// carries the page's CSRF token in the X-CSRF-Token header.

const PAGE = JSON.parse(document.getElementById("kg-page").textContent);

export function page() {
  return PAGE;
}

export function can(permission) {
  return Boolean(PAGE.can[permission] || PAGE.can.admin);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(path, { method = "GET", body, signal } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD") {
    headers["X-CSRF-Token"] = PAGE.csrf;
    if (body !== undefined) headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) {
    const code = data && data.code ? data.code : `http_${response.status}`;
    const message = data && data.message ? data.message : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, code, message);
  }
  return data;
}

/** Whether the server offers `path` (an OpenAPI path such as "/api/v1/run-counts"). */
let spec = null;
export async function offers(path, param) {
  if (spec === null) {
    try {
      spec = await (await fetch("/openapi.json", { credentials: "same-origin" })).json();
    } catch {
      spec = { paths: {} };
    }
  }
  const found = Object.keys(spec.paths || {}).find((p) => p === path || p.replace(/:kgid/g, "") === path);
  if (!found) return false;
  if (param === undefined) return true;
  const operation = spec.paths[found].get || spec.paths[found].post || {};
  return (operation.parameters || []).some((p) => p.name === param);
}

export function enc(id) {
  return encodeURIComponent(id);
}

export function runPath(workflowId) {
  return `/api/v1/runs/${enc(workflowId)}`;
}

/** Build an element: el("a", {href: "/", class: "x"}, "text", child). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "style") {
      // Through the CSSOM: the page's CSP refuses inline style attributes.
      for (const rule of String(value).split(";")) {
        const i = rule.indexOf(":");
        if (i > 0) node.style.setProperty(rule.slice(0, i).trim(), rule.slice(i + 1).trim());
      }
    }
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return node;
}

export function toast(message, kind = "info") {
  const box = document.getElementById("toast");
  const item = el("p", { class: `toast ${kind}` }, message);
  box.append(item);
  setTimeout(() => item.remove(), kind === "error" ? 9000 : 4000);
}

export { fmtClock, fmtFull, fmtTime, timeEl } from "./time.js";

export function fmtDur(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${Math.round(seconds % 60)}s`;
  return `${Math.floor(seconds / 3600)}h ${Math.round((seconds % 3600) / 60)}m`;
}

export function json(value, indent = 2) {
  try {
    return JSON.stringify(value, null, indent);
  } catch {
    return String(value);
  }
}

export function short(value, max = 80) {
  const text = typeof value === "string" ? value : json(value, 0);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function statusBadge(status) {
  return el("span", { class: `badge s-${status}` }, status.replaceAll("_", " "));
}

/** A run's badge: its state (``waiting_for_review`` for a running run that waits for a
 * reviewer, else its status), from the run view. */
export function runBadge(run) {
  const state = run.state || run.status;
  return el("span", { class: `badge s-${state}`, dataset: { state } }, state.replaceAll("_", " "));
}

const MARKER_GLYPH = { worker_lost: "✕", retried: "↻", rate_limited: "429", waiting_for_review: "?", blocked: "⚠" };

/** A run's trouble markers (the run view's ``markers``, worded by the server) as chips. */
export function markerChips(markers, { skip = [] } = {}) {
  return (markers || [])
    .filter((m) => !skip.includes(m.kind))
    .map((m) => el("span", { class: `marker m-${m.kind}`, dataset: { marker: m.kind, n: String(m.count) } }, el("span", { class: "glyph", "aria-hidden": "true" }, MARKER_GLYPH[m.kind] || "•"), ` ${m.text}`));
}

export function runHref(workflowId, runId) {
  const q = new URLSearchParams({ id: workflowId });
  if (runId) q.set("run", runId);
  return `/run?${q}`;
}

export function volumeHref(name, version, ref = "main") {
  const q = new URLSearchParams({ name, ref });
  if (version) q.set("version", String(version));
  return `/memory/volume?${q}`;
}

/** The element id of an operation's card on the Reviews page (the run page links to it). */
export function reviewAnchor(operationId) {
  return `op-card-${operationId.replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

/** Report a failed call in the toast area; returns the error for chaining. */
export function report(error, what) {
  const message = error instanceof ApiError ? `${what}: ${error.message} (${error.status})` : `${what}: ${error}`;
  toast(message, "error");
  return error;
}
