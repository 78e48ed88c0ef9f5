// Accessible tabs: arrow keys move between tabs, the selected one shows its panel.

export function tabs(list, onShow = () => {}) {
  const all = [...list.querySelectorAll('[role="tab"]')];
  const show = (tab) => {
    for (const t of all) {
      const on = t === tab;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    }
    onShow(tab.id);
  };
  for (const tab of all) {
    tab.addEventListener("click", () => show(tab));
    tab.addEventListener("keydown", (event) => {
      const i = all.indexOf(tab);
      let next = null;
      if (event.key === "ArrowRight") next = all[(i + 1) % all.length];
      if (event.key === "ArrowLeft") next = all[(i - 1 + all.length) % all.length];
      if (next) {
        event.preventDefault();
        next.focus();
        show(next);
      }
    });
  }
  return show;
}
