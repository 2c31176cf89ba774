// A heatmap that zooms, on a canvas: one head's queries × keys of a long text, from an overview
// max-pooled to screen size down to labelled cells with their exact numbers. The page, the
// notebook widget and an exported file use it alike; each hands it a data *source*
// (zoomdata.js: overview(), window(r0, r1, c0, c1), row(q), search(text), promises of
// qkv.views.zoom's payloads), so this module never fetches by itself.
//
//   const view = zoomView(root, source, { onSelect(q), q });  // builds into root
//   view.setSource(other, q)    // τ, layer, head or text changed: new overview, zoom kept
//   view.select(q)              // the query whose row the strip shows
//   view.show(r0, r1, c0, c1)   // zoom to a region (token units)
//
// Wheel zooms around the pointer, a drag pans, a click selects the query under it; keys:
// arrows pan, + and − zoom, 0 shows everything; a brush on the small overview zooms to the
// brushed region. Every redraw is drawImage of ImageData made once per payload, and only the
// visible window is requested, when the overview is coarser than the screen.
import { fmt, h } from "./dom.js";
import { toCanvas } from "./zoomdata.js";
import { listen } from "./zoominput.js";
import * as parts from "./zoomrow.js";

const ML = 96, MT = 84;      // margins for the row and key labels (CSS px)
const MIN_SPAN = 2;          // tokens: the deepest zoom
const LABEL_PX = 11;         // cells at least this tall/wide get their token labels
const NUMBER_PX = [34, 15];  // cells at least this wide and tall get their numbers
const BRUSH = 150;           // the small overview's size (CSS px)
export const MAX_WINDOW_CELLS = 128 * 128;  // qkv.views.zoom.MAX_WINDOW_CELLS

// The factor qkv.views.zoom.window pools a window of rows × keys by.
export function windowFactor(rows, keys, maxCells = MAX_WINDOW_CELLS) {
  let f = Math.max(1, Math.ceil(Math.sqrt((rows * keys) / maxCells)));
  while (Math.ceil(rows / f) * Math.ceil(keys / f) > maxCells) f += 1;
  return f;
}

export function zoomView(root, source, options = {}) {
  const size = options.size || 560;
  const main = h("canvas", { class: "zoom-main", tabindex: 0, role: "img",
    "aria-label": "attention weights: queries down, keys across; wheel or + − zoom, drag or " +
                  "arrows pan, click a row to select its query" });
  const brush = h("canvas", { class: "zoom-brush", role: "img",
    "aria-label": "the whole head; drag a rectangle here to zoom to it" });
  const where = h("p", { class: "hint zoom-where", "aria-live": "polite" });
  const reset = h("button", { type: "button", class: "zoom-reset" }, "show all");
  const row = parts.rowPart((key) => focusKey(key));
  const search = parts.searchPart((text) => find(text), (q) => { select(q, true); center(q, null); });
  const legend = parts.legendPart();
  const box = h("div", { class: "zoom" },
    h("div", { class: "zoom-top" }, search.el, legend.el),
    h("div", { class: "zoom-body" }, main,
      h("div", { class: "zoom-side" }, brush, where, reset)),
    row.el);
  root.replaceChildren(box);

  const st = { source, ov: null, ovImg: null, win: null, winImg: null, rowData: null,
               view: null, q: options.q ?? null, asked: { ov: 0, win: 0, row: 0 },
               times: [], drawn: null, redraws: 0, error: null };
  const W = size, H = size;
  setupCanvas(main, ML + W, MT + H);
  setupCanvas(brush, BRUSH, BRUSH);

  // ---- data --------------------------------------------------------------------------------

  async function loadOverview() {
    const n = ++st.asked.ov;
    const ov = await st.source.overview();
    if (n !== st.asked.ov) return;
    const { L, S } = ov.header;
    if (!st.ov || st.ov.header.L !== L || st.ov.header.S !== S) st.view = [0, L, 0, S];
    st.ov = ov;
    st.ovImg = toCanvas(ov);
    st.win = null;  // a window of another head or τ must not be drawn over this one
    st.winImg = null;
    redraw();
    needWindow();
  }

  // a new source (another head, τ, step or text); q: the query selected in it (default: the
  // same as before)
  function setSource(next, q = st.q) {
    st.source = next;
    st.q = q;
    st.asked.win += 1;
    const done = loadOverview();
    done.catch(failed);  // said where the view is drawn; a caller may await it as well
    if (st.q !== null) loadRow(st.q);
    return done;
  }

  let pending = null;
  function needWindow() {
    if (pending) return;
    pending = setTimeout(() => { pending = null; loadWindow().catch(failed); }, 40);
  }

  async function loadWindow() {
    if (!st.ov) return;
    const [r0, r1, c0, c1] = visible();
    const f = windowFactor(r1 - r0, c1 - c0);
    const [fr, fk] = st.ov.header.factor;
    if (f >= Math.max(fr, fk)) return;  // the overview is as fine as a window would be
    const w = st.win?.header;
    if (w && w.r0 <= r0 && w.r1 >= r1 && w.c0 <= c0 && w.c1 >= c1 && w.factor <= f) return;
    const n = ++st.asked.win;
    const got = await st.source.window(r0, r1, c0, c1);
    if (n !== st.asked.win) return;
    const { lo, hi } = st.ov.header;
    st.win = got;
    st.winImg = toCanvas(got, lo, hi);
    redraw();
  }

  async function loadRow(q) {
    const n = ++st.asked.row;
    const got = await st.source.row(q).catch((e) => { failed(e); return null; });
    if (!got || n !== st.asked.row) return;
    st.rowData = got;
    drawRowPart();
  }

  async function find(text) {
    try {
      parts.drawHits(search, await st.source.search(text));
    } catch (e) {
      parts.searchFailed(search, e.message);
    }
  }

  function failed(e) {
    st.error = e.message;
    where.textContent = `cannot draw this: ${e.message}`;
    options.onError?.(e.message);
  }

  // ---- the view region -----------------------------------------------------------------------

  function visible() {
    const [r0, r1, c0, c1] = st.view;
    return [Math.floor(r0), Math.ceil(r1), Math.floor(c0), Math.ceil(c1)];
  }

  function show(r0, r1, c0, c1) {
    const { L, S } = st.ov.header;
    const fit = (a, b, n) => {
      let span = Math.min(n, Math.max(Math.min(MIN_SPAN, n), b - a));
      a = Math.max(0, Math.min(n - span, (a + b) / 2 - span / 2));
      return [a, a + span];
    };
    st.view = [...fit(r0, r1, L), ...fit(c0, c1, S)];
    redraw();
    needWindow();
  }

  function zoomBy(k, fy = 0.5, fx = 0.5) {
    const [r0, r1, c0, c1] = st.view;
    const ry = r0 + (r1 - r0) * fy, cx = c0 + (c1 - c0) * fx;
    show(ry - (ry - r0) * k, ry + (r1 - ry) * k, cx - (cx - c0) * k, cx + (c1 - cx) * k);
  }

  function panBy(dr, dc) {
    const [r0, r1, c0, c1] = st.view;
    show(r0 + dr, r1 + dr, c0 + dc, c1 + dc);
  }

  // rows and keys around (q, key) at a size that labels every cell
  function center(q, key) {
    const span = Math.min(W / (NUMBER_PX[0] + 2), st.ov.header.S);
    const [r0, r1, c0, c1] = st.view;
    const k = key ?? (c0 + c1) / 2, rs = r1 - r0 > span ? span : r1 - r0;
    show(q + 0.5 - rs / 2, q + 0.5 + rs / 2, k + 0.5 - span / 2, k + 0.5 + span / 2);
  }

  function focusKey(key) {
    if (st.q !== null) center(st.q, key);
  }

  function select(q, tell = false) {
    st.q = q;
    redraw();
    loadRow(q);
    if (tell) options.onSelect?.(q);
  }

  // ---- drawing -------------------------------------------------------------------------------

  function redraw() {
    if (!st.ov) return;
    const t0 = performance.now();
    const ctx = main.getContext("2d");
    const [r0, r1, c0, c1] = st.view;
    const cw = W / (c1 - c0), ch = H / (r1 - r0);
    ctx.clearRect(0, 0, ML + W, MT + H);
    ctx.save();
    ctx.beginPath();
    ctx.rect(ML, MT, W, H);
    ctx.clip();
    ctx.imageSmoothingEnabled = false;
    const [fr, fk] = st.ov.header.factor;
    ctx.drawImage(st.ovImg, c0 / fk, r0 / fr, (c1 - c0) / fk, (r1 - r0) / fr, ML, MT, W, H);
    const w = st.win?.header;
    if (w) {
      const [nr, nc] = w.shape;
      ctx.save();
      ctx.beginPath();
      ctx.rect(ML + (w.c0 - c0) * cw, MT + (w.r0 - r0) * ch, (w.c1 - w.c0) * cw, (w.r1 - w.r0) * ch);
      ctx.clip();
      ctx.drawImage(st.winImg, ML + (w.c0 - c0) * cw, MT + (w.r0 - r0) * ch,
                    nc * w.factor * cw, nr * w.factor * ch);
      ctx.restore();
    }
    const drawn = { view: st.view.slice(), rows: [], keys: [], numbers: 0, cells: [] };
    if (cw >= 6 && ch >= 6) gridLines(ctx, st.view, cw, ch);
    if (w?.exact && cw >= NUMBER_PX[0] && ch >= NUMBER_PX[1]) numbers(ctx, w, cw, ch, drawn);
    ctx.restore();
    if (st.q !== null && st.q + 1 > r0 && st.q < r1) {
      ctx.strokeStyle = "#b22222";
      ctx.lineWidth = 2;
      ctx.strokeRect(ML, MT + (st.q - r0) * ch, W, Math.max(2, ch));
    }
    axisLabels(ctx, w, cw, ch, drawn);
    drawBrush();
    st.drawn = drawn;
    st.redraws += 1;
    root.dataset.zoomRedraws = String(st.redraws);
    const [a, b, c, d] = visible();
    where.textContent = `queries ${a}–${b - 1}, keys ${c}–${d - 1} of ${st.ov.header.L}` +
      (w?.exact && w.r0 <= a && w.r1 >= b && w.c0 <= c && w.c1 >= d ? " · exact numbers"
        : ` · pooled ×${w && w.r0 <= a && w.r1 >= b ? w.factor : Math.max(fr, fk)}`);
    parts.drawLegend(legend, st.ov.header, w || null);
    if (st.rowData) drawRowPart();
    st.times.push(performance.now() - t0);
    if (st.times.length > 500) st.times.shift();
  }

  function gridLines(ctx, [r0, r1, c0, c1], cw, ch) {
    ctx.strokeStyle = "rgba(255, 255, 255, 0.55)";
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let r = Math.ceil(r0); r <= r1; r++) {
      const y = Math.round(MT + (r - r0) * ch) + 0.5;
      ctx.moveTo(ML, y); ctx.lineTo(ML + W, y);
    }
    for (let c = Math.ceil(c0); c <= c1; c++) {
      const x = Math.round(ML + (c - c0) * cw) + 0.5;
      ctx.moveTo(x, MT); ctx.lineTo(x, MT + H);
    }
    ctx.stroke();
  }

  function numbers(ctx, w, cw, ch, drawn) {
    const [r0, r1, c0, c1] = visible();
    const [vr0, , vc0] = st.view;
    const nc = w.shape[1];
    ctx.font = "10px ui-monospace, monospace";
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    for (let r = Math.max(r0, w.r0); r < Math.min(r1, w.r1); r++) {
      for (let c = Math.max(c0, w.c0); c < Math.min(c1, w.c1); c++) {
        const v = st.win.data[(r - w.r0) * nc + (c - w.c0)];
        const dark = w.step === "weights" ? Math.sqrt(Math.max(0, v)) > 0.45 : false;
        ctx.fillStyle = dark ? "#fff" : "#1d2433";
        ctx.fillText(fmt(v, cw >= 44 ? 3 : 2), ML + (c - vc0 + 0.5) * cw, MT + (r - vr0 + 0.5) * ch);
        drawn.numbers += 1;
        if (drawn.cells.length < 4096) drawn.cells.push([r, c, v]);
      }
    }
  }

  function axisLabels(ctx, w, cw, ch, drawn) {
    const [r0, r1, c0, c1] = visible();
    const [vr0, , vc0] = st.view;
    ctx.fillStyle = "#1d2433";
    ctx.font = "11px ui-monospace, monospace";
    const labelled = w?.exact && w.r0 <= r0 && w.r1 >= r1 && w.c0 <= c0 && w.c1 >= c1;
    const rowAt = (r) => [ML - 4, MT + (r - vr0 + 0.5) * ch];
    if (labelled && ch >= LABEL_PX) names(ctx, "rows", r0, r1, (r) => w.rows[r - w.r0], rowAt, drawn.rows);
    else ticks(ctx, "rows", r0, r1, rowAt);
    const keyAt = (c) => [ML + (c - vc0 + 0.5) * cw, MT - 4];
    if (labelled && cw >= LABEL_PX) names(ctx, "keys", c0, c1, (c) => w.keys[c - w.c0], keyAt, drawn.keys);
    else ticks(ctx, "keys", c0, c1, (c) => [ML + (c - vc0 + 0.5) * cw, MT - 6]);
  }

  // every visible cell's token: beside its row, or slanted above its key
  function names(ctx, axis, a, b, token, at, drawn) {
    const rows = axis === "rows";
    ctx.textAlign = rows ? "right" : "left";
    ctx.textBaseline = "middle";
    for (let i = a; i < b; i++) {
      const [x, y] = at(i);
      if (rows ? y < MT || y > MT + H : x < ML || x > ML + W) continue;
      const t = token(i);
      ctx.save();
      ctx.translate(x, y);
      if (!rows) ctx.rotate(-Math.PI / 2.6);
      ctx.fillText(t.length > 12 ? `${t.slice(0, 11)}…` : t, 0, 0);
      ctx.restore();
      drawn.push(t);
    }
  }

  // positions at a round step where cells are too small to name
  function ticks(ctx, axis, a, b, at) {
    const span = b - a, raw = span / 6, mag = 10 ** Math.floor(Math.log10(Math.max(1, raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    ctx.textAlign = axis === "rows" ? "right" : "center";
    ctx.textBaseline = axis === "rows" ? "middle" : "bottom";
    for (let p = Math.ceil(a / step) * step; p < b; p += step) ctx.fillText(String(p), ...at(p));
  }

  function drawBrush(rect = null) {
    const ctx = brush.getContext("2d");
    const { L, S } = st.ov.header;
    ctx.clearRect(0, 0, BRUSH, BRUSH);
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(st.ovImg, 0, 0, BRUSH, BRUSH);
    const [r0, r1, c0, c1] = rect || st.view;
    ctx.strokeStyle = "#b22222";
    ctx.lineWidth = 1.5;
    ctx.strokeRect((c0 / S) * BRUSH, (r0 / L) * BRUSH, Math.max(2, ((c1 - c0) / S) * BRUSH),
                   Math.max(2, ((r1 - r0) / L) * BRUSH));
  }

  function drawRowPart() {
    if (!st.view) return;  // the row came before the overview: redraw() draws it then
    const [, , c0, c1] = st.view;
    parts.drawRow(row, st.rowData, [c0, c1], ML + W);
  }

  const api = { setSource, select: (q, tell = false) => select(q, tell), show: (...a) => show(...a), redraw,
                zoomBy, panBy, drawBrush, state: st, ready: null };
  listen({ main, brush, reset, api, box: { ML, MT, W, H, BRUSH } });
  root.zoom = api;
  api.ready = setSource(source);
  return api;
}

function setupCanvas(c, w, hgt) {
  const dpr = window.devicePixelRatio || 1;
  c.width = Math.round(w * dpr);
  c.height = Math.round(hgt * dpr);
  c.style.width = `${w}px`;
  c.style.height = `${hgt}px`;
  c.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
}
