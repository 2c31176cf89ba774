// A long text's view (past views/long_text.py's PANEL_TOKENS tokens): what fits a screen
// instead of every number of a head. The selected head in the zooming heatmap (zoom.js, fed
// by the kernel: source.js), the selected query's heaviest keys in numbers, the tokens to pick
// a query from, and every head pooled (asked for when its panel opens).
import { $ as byId, fmt, h } from "../web/static/dom.js";
import { gridTable } from "../web/static/grid.js";
import { zoomView } from "../web/static/zoom.js";
import { fromBuffers } from "../web/static/zoomdata.js";
import { kernelSource } from "./source.js";

const ZOOM_PX = 340;  // the heatmap's largest side: the view stays within 900 px with it open
const BESIDE = 96 + 190;  // zoom.js's row labels at the left and its small overview at the right

export const LONG_OPEN = ["panel-view"];  // the panels open at first

export function buildLong(info) {
  return h("main", { class: "long" },
    h("section", { id: "panel-view", class: "panel wide" },
      h("h2", {}, h("code", {}, "weights"), " of the selected head ", h("span", { id: "view-title" })),
      h("p", { class: "hint" }, "wheel or + − zooms, a drag or the arrows pan, a click on a row " +
        "selects its query"),
      h("div", { id: "view" }, h("div", { id: "zoom-root" }))),
    h("section", { id: "panel-row", class: "panel wide" },
      h("h2", {}, "the selected query's heaviest keys"),
      h("dl", { id: "row-stats", class: "stats" }),
      h("ol", { id: "top-keys", class: "top-keys" })),
    h("section", { id: "panel-tokens", class: "panel wide" },
      h("h2", {}, "tokens · click one to make it the query"),
      h("div", { id: "tokens", class: "tokens scroll", role: "toolbar", "aria-label": "tokens" })));
}

// The query control for the header: an index, with the token it names beside it.
export function queryControl(info) {
  return h("label", {}, "query ",
    h("input", { type: "number", id: "query", min: 0, max: info.tokens.length - 1, step: 1,
                 "aria-label": "query token index" }),
    " ", h("span", { id: "query-token", class: "hint" }));
}

// Fills the token buttons (once: thousands of them, so only when their panel opens).
export function fillTokens(root, info, onSelect) {
  const box = byId("tokens", root);
  if (box.childElementCount) return;
  box.append(...info.tokens.map((tok, j) => h("button", {
    type: "button", class: "token", dataset: { index: j }, onclick: () => onSelect(j) }, tok)));
}

// Paints the brief answer ({settings, selected}) into the long view.
export function drawLong(root, result, info, onSelect) {
  const $ = (id) => byId(id, root);
  const st = result.settings, sel = result.selected;
  $("view-title").textContent = [info.layers ? `· layer ${st.layer}` : "",
    info.n_heads ? `head ${st.head}` : "", `τ = ${fmt(st.temperature, 2)}`].filter(Boolean).join(", ");
  if ($("query")) {
    $("query").value = String(st.select);
    $("query-token").textContent = info.tokens[st.select];
  }
  // an exported file holds the top keys only: a number it leaves out is not listed
  const stat = (term, value, text) => (value == null ? [] : [h("dt", {}, term), h("dd", {}, text())]);
  $("row-stats").replaceChildren(
    ...stat("query", sel.index, () => `${sel.token} (position ${sel.index})`),
    ...stat("keys it may see", sel.visible_keys, () => String(sel.visible_keys)),
    ...stat("entropy", sel.entropy, () => `${fmt(sel.entropy, 3)} nats` +
      (sel.effective_tokens == null ? "" : ` ≈ ${fmt(sel.effective_tokens, 1)} keys' worth`)),
    ...stat("Σ weights", sel.weights_sum, () => fmt(sel.weights_sum, 4)));
  $("top-keys").replaceChildren(...sel.top_keys.map((k) => h("li", {},
    h("button", { type: "button", class: "token", dataset: { index: k.position },
                  title: "make this key the query", onclick: () => onSelect(k.position) }, k.token),
    " ", h("span", { class: "weight", dataset: { weight: k.weight } }, fmt(k.weight, 4)))));
  for (const b of $("tokens").children) {
    const on = Number(b.dataset.index) === st.select;
    b.classList.toggle("selected", on);
    b.setAttribute("aria-pressed", String(on));
  }
}

// The zooming heatmap of the chosen head, made on the first answer and fed a new source when
// the layer, head or τ changes. Returns draw(settings).
export function zoomer(root, ask, onSelect, onError) {
  let view = null, key = null;
  return (st) => {
    const params = { layer: st.layer, head: st.head, temperature: st.temperature };
    const next = JSON.stringify(params);
    if (!view) {
      const box = byId("zoom-root", root);
      // one row with the small overview; narrower views wrap more text, so a smaller heatmap
      const size = Math.max(200, Math.min(ZOOM_PX, box.clientWidth - BESIDE - 60));
      view = zoomView(box, kernelSource(ask, params), { size, q: st.select, onSelect, onError });
    } else if (next !== key) {
      view.setSource(kernelSource(ask, params));
    }
    if (view.state.q !== st.select) view.select(st.select);
    key = next;
  };
}

// The grid of every head, pooled by the kernel when asked (the thumbnails request).
export function loadThumbnails(box, ask, onPick, after) {
  box.replaceChildren(h("p", { class: "hint" }, "pooling every head of every layer…"));
  ask("thumbnails").then(({ header, buffers }) => {
    const { data } = fromBuffers(header, buffers[0]);
    box.replaceChildren(gridTable({ shape: header.shape, bytes: data, sqrt: true }, onPick,
      header.layers));
    after();
  }, (e) => box.replaceChildren(h("p", { class: "hint" }, `cannot pool the heads: ${e.message}`)));
}
