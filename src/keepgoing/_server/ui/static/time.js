// Times as a person reads them: one setting (UTC, local or relative, kept in this
// browser) governs every time the UI shows and every time input it reads. The zone
// is named on each input; hovering a time shows it in full, to the millisecond.

const KEY = "kg-time";
export const MODES = { utc: "UTC", local: "Local", relative: "Relative" };

export function timeMode() {
  try {
    const mode = localStorage.getItem(KEY);
    return mode in MODES ? mode : "utc";
  } catch {
    return "utc"; // storage refused (a private window): the default
  }
}

export function setTimeMode(mode) {
  if (!(mode in MODES)) throw new Error(`unknown time mode ${mode}`);
  try {
    localStorage.setItem(KEY, mode);
  } catch {
    /* kept for this page only */
  }
}

/** The browser's zone, as IANA names it ("America/New_York"). */
export function browserZone() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
}

/** Whether times are shown (and typed) in UTC. */
function utc() {
  return timeMode() === "utc";
}

/** The zone the time inputs read: "UTC", or the browser's (relative times are typed
 * in local time). */
export function zoneLabel() {
  return utc() ? "UTC" : browserZone();
}

function pad(n, width = 2) {
  return String(n).padStart(width, "0");
}

function parts(d) {
  return utc()
    ? [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds()]
    : [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds(), d.getMilliseconds()];
}

function offset(d) {
  if (utc()) return "UTC";
  const minutes = -d.getTimezoneOffset();
  const sign = minutes >= 0 ? "+" : "−";
  const abs = Math.abs(minutes);
  return `UTC${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}

function absolute(seconds, ms) {
  const d = new Date(seconds * 1000);
  const [y, mo, da, h, mi, s, milli] = parts(d);
  const clock = `${pad(h)}:${pad(mi)}:${pad(s)}${ms ? `.${pad(milli, 3)}` : ""}`;
  return `${y}-${pad(mo)}-${pad(da)} ${clock}`;
}

/** How long ago (or from now) `seconds` is, in words: "3 min ago", "in 2 h". */
export function relative(seconds, now = Date.now() / 1000) {
  const delta = now - seconds;
  const ahead = delta < 0;
  const d = Math.abs(delta);
  let text;
  if (d < 1) return "just now";
  if (d < 60) text = `${Math.floor(d)} s`;
  else if (d < 3600) text = `${Math.floor(d / 60)} min`;
  else if (d < 86400) text = `${Math.floor(d / 3600)} h ${Math.floor((d % 3600) / 60)} min`;
  else text = `${Math.floor(d / 86400)} d ${Math.floor((d % 86400) / 3600)} h`;
  return ahead ? `in ${text}` : `${text} ago`;
}

/** A time as the setting shows it: "2026-01-02 03:04:05 UTC", local with its offset, or
 * relative ("3 min ago"). */
export function fmtTime(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (timeMode() === "relative") return relative(seconds);
  const d = new Date(seconds * 1000);
  return `${absolute(seconds, false)} ${utc() ? "UTC" : offset(d)}`;
}

/** The full timestamp, to the millisecond, with its zone: what hovering a time shows,
 * and the History tab's column. In relative mode, local time. */
export function fmtFull(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  return `${absolute(seconds, true)} ${offset(new Date(seconds * 1000))}`;
}

/** The time of day, to the second (or ms), in the setting's zone: for axes and playheads. */
export function fmtClock(seconds, ms = false) {
  if (seconds === null || seconds === undefined) return "—";
  return absolute(seconds, ms).slice(11);
}

/** A <time> element: the setting's text, the full timestamp on hover. */
export function timeEl(seconds, attrs = {}) {
  const node = document.createElement("time");
  node.textContent = fmtTime(seconds);
  if (seconds !== null && seconds !== undefined) {
    node.dateTime = new Date(seconds * 1000).toISOString();
    node.title = fmtFull(seconds);
    node.dataset.at = String(seconds);
  }
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

/** A `datetime-local` input's value for `seconds`, in the inputs' zone. */
export function toInput(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "";
  const d = new Date(seconds * 1000);
  const [y, mo, da, h, mi, s] = parts(d);
  return `${y}-${pad(mo)}-${pad(da)}T${pad(h)}:${pad(mi)}${s ? `:${pad(s)}` : ""}`;
}

/** UNIX seconds for a `datetime-local` input's value, read in the inputs' zone; null
 * when empty or not a time. */
export function fromInput(value) {
  if (!value) return null;
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/.exec(value);
  if (!match) return null;
  const [y, mo, d, h, mi, s = "0", ms = "0"] = match.slice(1);
  const args = [Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), Number(ms.padEnd(3, "0"))];
  const t = utc() ? Date.UTC(...args) : new Date(...args).getTime();
  return Number.isNaN(t) ? null : t / 1000;
}

/** Redraw every <time> this module made (relative times move on). */
export function refreshTimes(root = document) {
  for (const node of root.querySelectorAll("time[data-at]")) node.textContent = fmtTime(Number(node.dataset.at));
}
