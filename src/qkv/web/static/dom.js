// Small DOM helpers shared by the page's modules (and by anything that reuses the render
// modules, such as a notebook widget): element lookup and building, number formatting, colours.
// Nothing here fetches or reads global page state.

const MATHML = "http://www.w3.org/1998/Math/MathML";

function fill(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.setAttribute("class", v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "object" ? c : String(c));
  }
  return el;
}

// $("tokens") -> the page's element with that id; $("tokens", root) looks inside root only
// (a widget's container or shadow root), so several copies of the panels can share a document.
export const $ = (id, root = document) =>
  root === document ? document.getElementById(id) : root.querySelector(`#${CSS.escape(id)}`);

// h("td", {class: "x"}, "text", child, ...) -> an HTML element
export const h = (tag, attrs, ...children) => fill(document.createElement(tag), attrs, children);

// m("mi", {}, "x") -> a MathML element
export const m = (tag, attrs, ...children) =>
  fill(document.createElementNS(MATHML, tag), attrs, children);

// The trace's JSON writes non-finite numbers as strings ("-inf", "inf", "nan").
export function num(v) {
  if (typeof v !== "string") return v;
  return v === "-inf" ? -Infinity : v === "inf" ? Infinity : NaN;
}

export const deep = (a) => (Array.isArray(a) ? a.map(deep) : num(a));

// A number as the page prints it: fixed decimals, a true minus sign, −∞ for masked scores.
export function fmt(v, digits = 2) {
  v = num(v);
  if (v === -Infinity) return "−∞";
  if (v === Infinity) return "∞";
  if (Number.isNaN(v)) return "NaN";
  let t = v.toFixed(digits);
  if (/^-0\.?0*$/.test(t)) t = t.slice(1);
  return t.replace("-", "−");
}

export const vec = (a, digits = 2, limit = 8) =>
  "[" + a.slice(0, limit).map((x) => fmt(x, digits)).join(", ") +
  (a.length > limit ? `, … (${a.length})` : "") + "]";

// WCAG relative luminance of [r, g, b] (0–255) and the contrast ratio of two colours.
export function luminance([r, g, b]) {
  const lin = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}
export function contrast(a, b) {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

const INK = [29, 36, 51], WHITE = [255, 255, 255];
const RAMP = [[247, 249, 252], [107, 150, 222], [37, 84, 199], [10, 31, 97]];  // light → dark blue

// The ramp's colour at t in [0, 1] (clamped): [r, g, b].
export function rampColor(t) {
  t = Math.max(0, Math.min(1, Number.isFinite(t) ? t : 0)) * (RAMP.length - 1);
  const k = Math.min(RAMP.length - 2, Math.floor(t)), f = t - k;
  return RAMP[k].map((a, c) => Math.round(a + (RAMP[k + 1][c] - a) * f));
}

// Blue ramp for t in [0, 1]; returns [background, whether text should be light], the text
// colour (white or ink) being whichever contrasts more with the background.
export function shade(t) {
  const c = rampColor(t);
  return [`rgb(${c.join(", ")})`, contrast(c, WHITE) > contrast(c, INK)];
}

// Diverging ramp for t in [−1, 1]: red (negative) ← white → blue (positive); [background, light].
export function diverge(t) {
  t = Math.max(-1, Math.min(1, Number.isFinite(t) ? t : 0));
  const end = t < 0 ? [178, 34, 34] : [37, 84, 199];
  const c = [255, 255, 255].map((a, k) => Math.round(a + (end[k] - a) * Math.abs(t)));
  return [`rgb(${c.join(", ")})`, contrast(c, WHITE) > contrast(c, INK)];
}

// Disable (why: a sentence) or enable (why: "") a control; a disabled control says why in its
// tooltip and, for screen readers, in its accessible description.
export function disable(el, why) {
  el.disabled = Boolean(why);
  if (why) {
    el.title = why;
    el.setAttribute("aria-description", why);
  } else {
    el.removeAttribute("title");
    el.removeAttribute("aria-description");
  }
}
