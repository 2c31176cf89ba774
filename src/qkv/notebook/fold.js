// Panels that fold, so the view stays short until a person opens what they want to read: a
// row of toggles names every panel (pressed = open); an open panel's heading folds it again.
import { h } from "../web/static/dom.js";

// Short names for the toggles (a panel without one shows its heading's text).
const NAMES = {
  "panel-grid": "every head", "panel-x": "tokens", "panel-diagram": "path",
  "panel-qkv": "q · k · v", "panel-pipeline": "heatmap", "panel-weights": "selected row",
  "panel-z": "z", "panel-heads": "heads", "panel-formula": "formula",
  "panel-walkthrough": "walkthrough", "panel-view": "heatmap", "panel-row": "top keys",
  "panel-tokens": "tokens",
};

// Makes every section.panel under main foldable and puts the toggles first in main; the ids in
// `open` start open. onOpen(id) runs the first time a panel opens (to fetch what it shows).
export function foldPanels(main, open = [], onOpen = () => {}) {
  const bar = h("nav", { class: "folds", "aria-label": "panels" }, h("span", { class: "hint" }, "show:"));
  for (const panel of main.querySelectorAll("section.panel")) {
    if (panel.hidden) continue;  // not part of this view
    const title = panel.querySelector(":scope > h2");
    const toggle = h("button", { type: "button", class: "fold-toggle", dataset: { panel: panel.id },
      "aria-controls": panel.id }, NAMES[panel.id] || (title ? title.textContent.trim() : panel.id));
    bar.append(toggle);
    let opened = false;
    const set = (on) => {
      panel.classList.toggle("folded", !on);
      toggle.setAttribute("aria-pressed", String(on));
      if (fold) fold.setAttribute("aria-expanded", String(on));
      if (on && !opened) { opened = true; onOpen(panel.id); }
    };
    let fold = null;
    if (title) {
      fold = h("button", { type: "button", class: "fold", title: "fold this panel" }, ...title.childNodes);
      title.replaceChildren(fold);
      fold.addEventListener("click", () => set(false));
    }
    toggle.addEventListener("click", () => set(panel.classList.contains("folded")));
    set(open.includes(panel.id));
  }
  main.prepend(bar);
  return bar;
}
