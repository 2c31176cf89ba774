// The layers × heads grid of a model's run: one thumbnail per head, queries down and keys
// across, shade ∝ √weight. The server sends every weight as one byte (qkv.views.grid); the page
// and the notebook widget both draw it with this module and mark the selected head.
import { h, rampColor } from "./dom.js";

// {shape, encoding, data (base64)} -> {shape, bytes}
export function decodeGrid(g) {
  const raw = atob(g.data);
  return { shape: g.shape, bytes: Uint8Array.from(raw, (c) => c.charCodeAt(0)) };
}

// The grid as a table of thumbnail buttons. layers: the model's layer shown in each column
// (default 0…n−1); onPick(layer, head) when one is clicked.
export function gridTable(grid, onPick, layers = null) {
  const [nLayers, nHeads, L] = grid.shape;
  const layerOf = (l) => (layers ? layers[l] : l);
  const table = h("table", { class: "head-grid" },
    h("thead", {}, h("tr", {}, h("th", { class: "corner" }, "head ↓ layer →"),
      ...Array.from({ length: nLayers }, (_, l) => h("th", { scope: "col" }, layerOf(l))))),
    h("tbody", {}, Array.from({ length: nHeads }, (_, hh) => h("tr", {},
      h("th", { scope: "row" }, `h${hh}`),
      ...Array.from({ length: nLayers }, (_, l) => h("td", {}, h("button", {
        type: "button", class: "thumb", dataset: { layer: layerOf(l), head: hh },
        title: `layer ${layerOf(l)}, head ${hh}`, "aria-label": `layer ${layerOf(l)}, head ${hh}`,
        onclick: () => onPick(layerOf(l), hh) }, thumbnail(grid, l, hh))))))));
  // 30 layers fit a 1400 px window at 30 px a thumbnail; fewer layers get larger ones
  table.style.setProperty("--thumb", `${nLayers > 12 ? 30 : 40}px`);
  return table;
}

// Marks the thumbnail of (layer, head) as selected, and no other, inside box.
export function markGrid(box, layer, head) {
  for (const b of box.querySelectorAll("button.thumb")) {
    const on = Number(b.dataset.layer) === layer && Number(b.dataset.head) === head;
    b.classList.toggle("selected", on);
    b.setAttribute("aria-pressed", String(on));
  }
}

// grid.sqrt: the bytes are round(255·√weight) already (qkv.views.zoom.thumbnails), else
// round(255·weight) (qkv.views.grid); each head is R × K (max-pooled past 64 tokens).
function thumbnail(grid, layer, head) {
  const [, nHeads, R, K] = grid.shape;
  const canvas = h("canvas", { width: K, height: R });
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(K, R);
  const offset = (layer * nHeads + head) * R * K;
  for (let i = 0; i < R * K; i++) {
    const t = grid.bytes[offset + i] / 255;
    const [r, g, b] = rampColor(grid.sqrt ? t : Math.sqrt(t));  // shade ∝ √weight
    img.data.set([r, g, b, 255], 4 * i);
  }
  ctx.putImageData(img, 0, 0);
  return canvas;
}
