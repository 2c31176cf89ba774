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

// Blue ramp for t in [0, 1]; returns [background, whether text should be light].
export function shade(t) {
  t = Math.max(0, Math.min(1, t));
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return [`rgb(${mix(247, 37)}, ${mix(249, 84)}, ${mix(252, 199)})`, t > 0.55];
}
