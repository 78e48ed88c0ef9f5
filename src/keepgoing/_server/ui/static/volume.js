// One volume's ref: its versions in a compact list filtered by file or text (who wrote
// each: run, step, attempt), the compare controls beside the list with the diff in
// view, its files at any version, and Roll back (volumes.write).

import { api, can, clear, el, enc, page, report, timeEl, toast, volumeHref } from "./api.js";

const { name, ref } = page().page;
const state = { versions: [], version: Number(page().page.version) || null, chosen: [] };
const base = `/api/v1/volumes/${enc(name)}`;

async function loadVersions() {
  try {
    const data = await api(`${base}/versions?${new URLSearchParams({ ref, limit: "1000" })}`);
    state.versions = data.versions.slice().reverse(); // newest first
    if (state.version === null && state.versions.length) state.version = state.versions[0].id;
    fileChoices();
    renderVersions();
    renderChosen();
    await loadFiles();
  } catch (error) {
    clear(document.getElementById("versions-body"), el("tr", {}, el("td", { colspan: "6", class: "error", role: "alert" }, error.message)));
  }
}

function fileChoices() {
  const select = document.getElementById("v-file");
  const kept = select.value;
  const paths = [...new Set(state.versions.flatMap((v) => v.paths))].sort();
  clear(select, el("option", { value: "" }, "every file"), paths.map((p) => el("option", { value: p }, p)));
  select.value = paths.includes(kept) ? kept : "";
}

function shown() {
  const needle = document.getElementById("v-filter").value.trim().toLowerCase();
  const file = document.getElementById("v-file").value;
  return state.versions.filter((v) => {
    if (file && !v.paths.includes(file)) return false;
    if (!needle) return true;
    const text = `v${v.id} ${v.paths.join(" ")} ${v.run_id || ""} step #${v.step ?? ""} ${v.message || ""}`.toLowerCase();
    return text.includes(needle);
  });
}

function choose(ids) {
  state.chosen = ids.slice(-2);
  renderVersions();
  renderChosen();
}

function renderVersions() {
  const head = state.versions.length ? state.versions[0].id : null;
  const found = shown();
  document.getElementById("versions-title").textContent = found.length === state.versions.length ? `Versions (${state.versions.length})` : `Versions (${found.length} of ${state.versions.length})`;
  const older = new Map(state.versions.map((v, i) => [v.id, state.versions[i + 1] ? state.versions[i + 1].id : null]));
  clear(
    document.getElementById("versions-body"),
    found.length
      ? found.map((v) => {
          const pick = el("input", { type: "checkbox", "aria-label": `Compare version ${v.id}`, checked: state.chosen.includes(v.id), dataset: { version: String(v.id) } });
          pick.addEventListener("change", () => choose(pick.checked ? [...state.chosen, v.id] : state.chosen.filter((x) => x !== v.id)));
          const actions = [];
          const previous = older.get(v.id);
          if (previous !== null) {
            const vs = el("button", { type: "button", class: "small vs-previous", "aria-label": `Compare version ${v.id} with version ${previous}`, dataset: { version: String(v.id) } }, "vs previous");
            vs.addEventListener("click", () => {
              choose([previous, v.id]);
              showDiff();
            });
            actions.push(vs);
          }
          if (can("volumes.write") && v.id !== head) {
            const button = el("button", { type: "button", class: "small rollback", "aria-label": `Roll back to version ${v.id}`, dataset: { version: String(v.id) } }, "Roll back");
            button.addEventListener("click", () => rollback(v.id));
            actions.push(button);
          }
          const who = v.run_id ? el("span", {}, el("a", { href: `/run?${new URLSearchParams({ run: v.run_id })}`, class: "writer", dataset: { runId: v.run_id }, title: v.run_id }, `run ${v.run_id.slice(0, 12)}`), ` step #${v.step} attempt ${v.attempt}`) : el("span", { class: "muted" }, v.message || "outside a task");
          return el(
            "tr",
            { class: `${v.id === state.version ? "current" : ""}${state.chosen.includes(v.id) ? " chosen" : ""}`, dataset: { version: String(v.id) } },
            el("td", {}, pick),
            el("td", {}, el("a", { href: volumeHref(name, v.id, ref), class: "version-link", "aria-current": v.id === state.version ? "true" : null, dataset: { version: String(v.id) } }, `v${v.id}`), v.id === head ? el("span", { class: "muted" }, " (newest)") : null),
            el("td", {}, timeEl(v.created_at)),
            el("td", {}, who),
            el("td", { class: "paths", title: v.paths.join(", ") }, v.paths.join(", ")),
            el("td", { class: "row-actions" }, actions),
          );
        })
      : el("tr", {}, el("td", { colspan: "6", class: "muted" }, "No version matches the filter.")),
  );
  document.getElementById("diff-selected").disabled = state.chosen.length !== 2;
  document.getElementById("diff-clear").disabled = state.chosen.length === 0;
}

function renderChosen() {
  const [a, b] = [...state.chosen].sort((x, y) => x - y);
  document.getElementById("compare-chosen").textContent =
    state.chosen.length === 2 ? `v${a} → v${b}` : state.chosen.length === 1 ? `v${state.chosen[0]} and… tick one more.` : "Tick two versions in the list, or use “vs previous” on one.";
}

async function loadFiles() {
  const list = document.getElementById("files");
  if (state.version === null) {
    clear(list, el("li", { class: "muted" }, "This ref has no versions yet."));
    return;
  }
  document.getElementById("files-title").textContent = `Files at v${state.version}`;
  clear(document.getElementById("file-view"));
  try {
    const data = await api(`${base}/files?${new URLSearchParams({ ref, version: String(state.version) })}`);
    clear(
      list,
      data.files.length
        ? data.files.map((f) => {
            const button = el("button", { type: "button", class: "link-button", dataset: { path: f.path } }, f.path);
            button.addEventListener("click", () => showFile(f.path));
            return el("li", {}, button, el("span", { class: "muted" }, ` ${f.size} bytes · `, timeEl(f.updated_at)));
          })
        : el("li", { class: "muted" }, "No files at this version."),
    );
  } catch (error) {
    clear(list, el("li", { class: "error" }, error.message));
  }
}

async function showFile(path) {
  const view = document.getElementById("file-view");
  try {
    const response = await fetch(`${base}/files/${path.split("/").map(enc).join("/")}?${new URLSearchParams({ ref, version: String(state.version), format: "text" })}`, { credentials: "same-origin" });
    const text = await response.text();
    if (!response.ok) throw new Error(JSON.parse(text).message);
    clear(view, el("h3", {}, `${path} at v${state.version}`), el("pre", { class: "code", id: "file-content" }, text));
  } catch (error) {
    clear(view, el("p", { class: "error" }, `${path}: ${error.message}`));
  }
}

async function showDiff() {
  const [a, b] = [...state.chosen].sort((x, y) => x - y);
  const box = document.getElementById("vol-diff");
  box.hidden = false;
  const out = document.getElementById("vol-diff-body");
  try {
    const data = await api(`${base}/diff?${new URLSearchParams({ ref, a: String(a), b: String(b) })}`);
    document.getElementById("diff-title").textContent = `Diff v${a} → v${b}`;
    const lines = (text) =>
      text.split("\n").map((line) => el("span", { class: line.startsWith("+") && !line.startsWith("+++") ? "diff-add" : line.startsWith("-") && !line.startsWith("---") ? "diff-del" : line.startsWith("@@") ? "diff-hunk" : "" }, `${line}\n`));
    clear(
      out,
      el("p", { id: "vol-diff-summary" }, `added ${data.added.length} · removed ${data.removed.length} · changed ${data.changed.length}`),
      Object.entries(data.unified || {}).map(([path, text]) => el("div", {}, el("h3", {}, path), el("pre", { class: "code diff", dataset: { path } }, lines(text)))),
    );
  } catch (error) {
    clear(out, el("p", { class: "error" }, error.message));
  }
}

async function rollback(version) {
  if (!confirm(`Make a new version of ${name} (${ref}) whose files equal v${version}? Nothing is deleted.`)) return;
  try {
    const made = await api(`${base}/rollback`, { method: "POST", body: { version, ref } });
    toast(`Rolled back: v${made.id} has the files of v${version}`);
    state.version = made.id;
    state.chosen = [];
    await loadVersions();
  } catch (error) {
    report(error, "Roll back");
  }
}

document.getElementById("diff-selected").addEventListener("click", showDiff);
document.getElementById("diff-clear").addEventListener("click", () => {
  document.getElementById("vol-diff").hidden = true;
  choose([]);
});
document.getElementById("v-filter").addEventListener("input", renderVersions);
document.getElementById("v-file").addEventListener("change", renderVersions);
loadVersions();
