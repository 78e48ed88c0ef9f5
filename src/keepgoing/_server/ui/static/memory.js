// Memory: every volume, its refs and each ref's newest version.

import { api, clear, el, volumeHref } from "./api.js";

const body = document.getElementById("volumes-body");
const more = document.getElementById("vol-more");
let offset = 0;

async function load(append) {
  try {
    const data = await api(`/api/v1/volumes?${new URLSearchParams({ limit: "100", offset: String(offset) })}`);
    const rows = data.volumes.map((v) =>
      el(
        "tr",
        {},
        el("td", {}, el("a", { href: volumeHref(v.name), class: "volume-link" }, v.name)),
        el(
          "td",
          {},
          v.refs.map((r) => el("span", { class: "fact" }, el("a", { href: volumeHref(v.name, r.head, r.name) }, r.name), r.head ? ` v${r.head}` : " (empty)", r.forked_from ? el("span", { class: "muted" }, ` from ${r.forked_from}`) : null, " ")),
        ),
      ),
    );
    if (!append && !rows.length) rows.push(el("tr", {}, el("td", { colspan: "2", class: "muted" }, "No volumes yet: a task makes one with Volume(name).")));
    if (append) body.append(...rows);
    else clear(body, rows);
    more.hidden = data.next_offset === null;
    offset = data.next_offset ?? offset;
  } catch (error) {
    clear(body, el("tr", {}, el("td", { colspan: "2", class: "error", role: "alert" }, error.message)));
  }
}

more.addEventListener("click", () => load(true));
load(false);
