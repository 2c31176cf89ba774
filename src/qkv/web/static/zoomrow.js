// The parts around the zooming heatmap (zoom.js): the selected query's row as a strip over
// every key with its top keys named, the token search box, and the legend that says how the
// overview is pooled. Each part builds its elements into a root and draws what it is given.
import { fmt, h, rampColor } from "./dom.js";
import { LUT, shadeOf } from "./zoomdata.js";

// ---- the row strip -------------------------------------------------------------------------

export function rowPart(onKey) {
  const title = h("p", { class: "zoom-row-title" }, "select a query: click a row of the heatmap");
  const strip = h("canvas", { class: "zoom-strip", height: 44, role: "img",
                              "aria-label": "the selected query's weights over every key" });
  const top = h("ol", { class: "zoom-top-keys", "aria-label": "its heaviest keys" });
  const el = h("div", { class: "zoom-row" }, title, strip, top);
  return { el, title, strip, top, onKey };
}

// payload: zoom.row's {header, data}; span: [c0, c1) of the keys the heatmap shows.
export function drawRow(part, payload, span, width) {
  const { header, data } = payload;
  part.title.textContent = `query ${header.token} (position ${header.q}): its weights over ` +
    `all ${header.S} keys · entropy ${fmt(header.entropy, 3)} nats · sum ${fmt(header.sum, 4)}` +
    (header.factor > 1 ? ` · each bar the largest of ${header.factor} keys (max-pooled)` : "");
  const c = part.strip;
  const dpr = window.devicePixelRatio || 1;
  const H = 44;
  if (c.width !== Math.round(width * dpr)) {
    c.width = Math.round(width * dpr);
    c.height = Math.round(H * dpr);
    c.style.width = `${width}px`;
    c.style.height = `${H}px`;
  }
  const ctx = c.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, H);
  const S = header.S, f = header.factor;
  const x = (key) => (key / S) * width;
  let peak = 0;
  for (const v of data) if (v > peak) peak = v;
  for (let j = 0; j < data.length; j++) {
    const v = data[j];
    if (!(v > 0)) continue;
    const s = shadeOf(v, "weights");
    const col = LUT[Math.max(s, 60)];
    ctx.fillStyle = `rgb(${col & 255}, ${(col >> 8) & 255}, ${(col >> 16) & 255})`;
    const hgt = Math.max(1, ((H - 8) * v) / (peak || 1));
    ctx.fillRect(x(j * f), H - hgt, Math.max(1, x((j + 1) * f) - x(j * f)), hgt);
  }
  ctx.strokeStyle = "rgba(178, 34, 34, 0.8)";  // the keys the heatmap shows
  ctx.strokeRect(x(span[0]) + 0.5, 0.5, Math.max(2, x(span[1]) - x(span[0]) - 1), H - 1);
  part.top.replaceChildren(...header.top.map((k, r) => h("li", {},
    h("button", { type: "button", class: "zoom-key", dataset: { index: k.index, weight: k.weight },
                  title: `show key ${k.index} beside the query`, onclick: () => part.onKey(k.index) },
      h("b", {}, `${r + 1}.`), ` ${k.token} `, h("span", { class: "hint" }, `@${k.index}`),
      ` ${fmt(k.weight, 4)}`))));
}

// ---- the search box ------------------------------------------------------------------------

export function searchPart(onFind, onPick) {
  const input = h("input", { type: "search", class: "zoom-search-text", placeholder: "find a token",
                             "aria-label": "find a token", spellcheck: "false" });
  const said = h("span", { class: "hint zoom-search-said", "aria-live": "polite" });
  const hits = h("ul", { class: "zoom-hits" });
  const el = h("form", { class: "zoom-search", role: "search",
                         onsubmit: (e) => { e.preventDefault(); if (input.value.trim()) onFind(input.value); } },
    input, h("button", { type: "submit" }, "find"), said, hits);
  return { el, input, said, hits, onPick };
}

export const SHOWN_HITS = 24;

export function drawHits(part, found) {
  part.said.textContent = found.count === 0 ? `no token matches ${JSON.stringify(found.query)}`
    : `${found.count} match${found.count === 1 ? "" : "es"}` +
      (found.count > SHOWN_HITS ? ` (the first ${SHOWN_HITS} shown)` : "");
  part.hits.replaceChildren(...found.hits.slice(0, SHOWN_HITS).map((hit) => h("li", {},
    h("button", { type: "button", class: "zoom-hit", dataset: { index: hit.index },
                  onclick: () => part.onPick(hit.index) }, `${hit.token} @${hit.index}`))));
}

export function searchFailed(part, message) {
  part.said.textContent = message;
  part.hits.replaceChildren();
}

// ---- the legend ----------------------------------------------------------------------------

export function legendPart() {
  const strip = h("span", { class: "strip" });
  const stops = Array.from({ length: 11 }, (_, k) => `rgb(${rampColor(k / 10).join(", ")}) ${k * 10}%`);
  strip.style.background = `linear-gradient(to right, ${stops.join(", ")})`;
  const scale = h("span", { class: "zoom-scale" });
  const pooled = h("span", { class: "zoom-pooled" });
  const zoomed = h("span", { class: "zoom-zoomed" });
  const el = h("div", { class: "zoom-legend" }, scale, strip, pooled, zoomed);
  return { el, scale, pooled, zoomed };
}

// overview: its header; win: the drawn window's header or null.
export function drawLegend(part, overview, win) {
  const lin = overview.encoding === "uint8 linear";
  part.scale.textContent = lin ? `${overview.step}: ${fmt(overview.lo, 2)} → ${fmt(overview.hi, 2)}`
    : "weight (shade ∝ √weight): 0 → 1";
  part.pooled.textContent = `overview: ${overview.legend}`;
  part.zoomed.textContent = !win ? "" : win.exact
    ? "here: exact float32 numbers"
    : `here: ${win.legend}`;
}
