// What the zooming heatmap (zoom.js) reads: the binary payloads of qkv.views.zoom, and the data
// *sources* that deliver them. A source is any object with
//   overview()               -> Promise<{header, data}>  (one byte a cell, max-pooled)
//   window(r0, r1, c0, c1)   -> Promise<{header, data}>  (float32, exact or max-pooled)
//   row(q)                   -> Promise<{header, data}>  (float32 strip, header.top: top keys)
//   search(text)             -> Promise<{query, hits: [{index, token}], count}>
// The page fetches them (httpSource), the notebook widget answers custom messages with
// buffers (fromBuffers reads one), an exported file embeds them (embeddedSource).
import { rampColor } from "./dom.js";

const MAGIC = "QKVZ";
const TYPED = { uint8: Uint8Array, float32: Float32Array, int32: Int32Array, float64: Float64Array };

// Payload.to_bytes(): "QKVZ", uint32 LE header length, JSON header (padded to 8), the array.
export function unpack(buffer) {
  const bytes = new Uint8Array(buffer);
  const magic = String.fromCharCode(...bytes.subarray(0, 4));
  if (magic !== MAGIC) throw new Error(`a zoom payload starts with ${MAGIC}, got ${magic}`);
  const n = new DataView(buffer, 4, 4).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  return fromBuffers(header, buffer.slice(8 + n));
}

// An anywidget message: the header as JSON and the array as one buffer (ArrayBuffer or a
// DataView of one).
export function fromBuffers(header, buffer) {
  const Typed = TYPED[header.dtype];
  if (!Typed) throw new Error(`unknown dtype ${header.dtype}`);
  const buf = buffer.buffer ? buffer.buffer.slice(buffer.byteOffset,
    buffer.byteOffset + buffer.byteLength) : buffer;
  const data = new Typed(buf);
  const want = header.shape.reduce((a, b) => a * b, 1);
  if (data.length !== want) {
    throw new Error(`${header.shape.join(" × ")} ${header.dtype} needs ${want} numbers, got ${data.length}`);
  }
  return { header, data };
}

// The page's source: POST {…params, r0, …} to base + "/overview" etc.; binary answers.
// post(path, body) -> Promise<ArrayBuffer> is the page's request function (errors its own).
export function httpSource(post, base, params) {
  const ask = (what, extra = {}) => post(`${base}/${what}`, { ...params, ...extra }).then(unpack);
  return {
    params,
    overview: () => ask("overview"),
    window: (r0, r1, c0, c1) => ask("window", { r0, r1, c0, c1 }),
    row: (q) => ask("row", { q }),
    search: (text) => post(`${base}/search`, { ...params, text }, "json"),
  };
}

// An exported file's source: everything computed beforehand. data: {overview, rows: {q: …},
// windows: [...], tokens} with each payload {header, data} (a typed array); a window is
// answered from the overview when no embedded window covers the request.
export function embeddedSource(data) {
  const covers = (w, r0, r1, c0, c1) => w.header.r0 <= r0 && w.header.r1 >= r1 &&
    w.header.c0 <= c0 && w.header.c1 >= c1;
  return {
    overview: async () => data.overview,
    window: async (r0, r1, c0, c1) => {
      const found = (data.windows || []).find((w) => covers(w, r0, r1, c0, c1));
      if (!found) throw new Error("this file holds no exact numbers here: the overview only");
      return found;
    },
    row: async (q) => {
      const r = data.rows?.[q];
      if (!r) throw new Error(`this file holds no row for query ${q}`);
      return r;
    },
    search: async (text) => searchTokens(data.tokens || [], text),
  };
}

// A token search in the browser (the export's; the server's is qkv.views.zoom.search): every
// label containing the text, edge spaces and case ignored, ␣ read as a space.
export function searchTokens(tokens, text, limit = 200) {
  const plain = (t) => t.replace(/␣/g, " ").trim().toLowerCase();
  const wanted = plain(text);
  const found = tokens.map((t, j) => [j, t]).filter(([, t]) => plain(t).includes(wanted));
  return { query: text, hits: found.slice(0, limit).map(([index, token]) => ({ index, token })),
           count: found.length };
}

// 256 colours of the ramp (RGBA, packed little-endian into uint32): index = shade × 255.
export const LUT = (() => {
  const lut = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    const [r, g, b] = rampColor(i / 255);
    lut[i] = (255 << 24) | (b << 16) | (g << 8) | r;
  }
  return lut;
})();
export const MASKED = (255 << 24) | (226 << 16) | (222 << 8) | 222;  // light grey: no value

// The shade index (0…255) of a number at a step: weights by √w (as the thumbnails and the
// page's heatmap), other steps linearly between lo and hi; -1 for no finite value.
export function shadeOf(v, step, lo, hi) {
  if (!Number.isFinite(v)) return -1;
  const t = step === "weights" ? Math.sqrt(Math.max(0, Math.min(1, v)))
    : hi > lo ? (v - lo) / (hi - lo) : 0;
  return Math.round(255 * Math.max(0, Math.min(1, t)));
}

// One payload as an offscreen canvas, one pixel a cell: an overview's bytes (already shades,
// or 1…255 linear with 0 = no value), a window's float32 numbers (shaded by shadeOf).
export function toCanvas(payload, lo = 0, hi = 1) {
  const { header, data } = payload;
  const [rows, cols] = header.shape.slice(-2);
  const canvas = offscreen(cols, rows);
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(cols, rows);
  const px = new Uint32Array(img.data.buffer);
  if (header.dtype === "uint8") {
    const linear = header.encoding === "uint8 linear";
    for (let i = 0; i < px.length; i++) {
      const b = data[i];
      px[i] = linear ? (b === 0 ? MASKED : LUT[Math.round(((b - 1) * 255) / 254)]) : LUT[b];
    }
  } else {
    for (let i = 0; i < px.length; i++) {
      const s = shadeOf(data[i], header.step, lo, hi);
      px[i] = s < 0 ? MASKED : LUT[s];
    }
  }
  ctx.putImageData(img, 0, 0);
  return canvas;
}

// An offscreen canvas where the browser has one, else a detached <canvas>.
function offscreen(w, hgt) {
  if (typeof OffscreenCanvas !== "undefined") return new OffscreenCanvas(w, hgt);
  const c = document.createElement("canvas");
  c.width = w;
  c.height = hgt;
  return c;
}
