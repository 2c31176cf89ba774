// The attention formula as MathML (native in the browser), filled in with the selected query's
// numbers from the trace: scores → ÷(scale, τ) → mask → softmax → weights·V = z.
import { fmt, m } from "./dom.js";

const LIMIT = 8;  // entries shown per vector before "…"

const mi = (x) => m("mi", {}, x);
const mo = (x) => m("mo", {}, x);
const mn = (x) => m("mn", {}, x);
const sub = (base, s) => m("msub", {}, base, typeof s === "string" ? mi(s) : s);

function vector(a, digits = 2) {
  const parts = [mo("[")];
  a.slice(0, LIMIT).forEach((x, j) => {
    if (j) parts.push(mo(","));
    parts.push(mn(fmt(x, digits)));
  });
  if (a.length > LIMIT) parts.push(mo(","), mo("…"));
  parts.push(mo("]"));
  return m("mrow", {}, parts);
}

// One aligned row of the derivation: left side (may be empty) | "= …"
const row = (left, ...right) => m("mtr", {}, m("mtd", {}, left || m("mrow", {})),
                                  m("mtd", {}, m("mrow", { displaystyle: "true" }, right)));

export function renderFormula(box, view, t) {
  const st = t.settings;
  const i = view.i;
  const tok = view.tokens[i];
  const dk = st.d_k;
  const standard = Math.abs(st.scale - 1 / Math.sqrt(dk)) < 1e-12;
  const unit = st.scale === 1;
  // the divisor of the scores: √d_k·τ, τ alone (scaling off), or (1/scale)·τ
  const divisor = (d, tau) => m("mrow", {},
    standard ? m("msqrt", {}, d) : unit ? null : mn(fmt(1 / st.scale, 3)),
    standard || !unit ? mo("·") : null, tau);
  const wrap = (inner) => (st.causal ? m("mrow", {}, mi("mask"), mo("("), inner, mo(")")) : inner);
  // the optional steps: cap·tanh(s ÷ cap), + b, and a sink in the softmax's denominator
  const cap = t.steps.capped ? mn(fmt(st.softcap, 3)) : null;
  const capped = (s) => (cap ? m("mrow", {}, cap, mo("·"), mi("tanh"), mo("("), s, mo("÷"),
                                  mn(fmt(st.softcap, 3)), mo(")")) : s);
  const biased = (s) => (t.steps.biased ? m("mrow", {}, s, mo("+"), sub(mi("b"), tok)) : s);
  const softmax = mi(t.steps.sink ? "softmax₊sink" : "softmax");

  const symbolic = row(sub(mi("z"), tok), mo("="), softmax, mo("("),
    wrap(biased(capped(m("mfrac", {}, m("mrow", {}, sub(mi("q"), tok), m("msup", {}, mi("K"), mi("T"))),
      divisor(sub(mi("d"), "k"), mi("τ")))))), mo(")"), mi("V"));
  const scores = view.pick(t.steps.scores)[i];
  const last = t.steps.biased ? "biased" : t.steps.capped ? "capped" : null;
  const withNumbers = last  // after a soft-cap or a bias: that step's own numbers
    ? row(null, mo("="), softmax, mo("("), wrap(vector(view.pick(t.steps[last])[i])), mo(")"), mi("V"))
    : row(null, mo("="), softmax, mo("("),
      wrap(m("mfrac", {}, vector(scores), divisor(mn(String(dk)), mn(fmt(st.temperature, 3))))),
      mo(")"), mi("V"));
  const masked = view.pick(t.steps.masked)[i];
  const weights = view.pick(t.steps.weights)[i];
  const z = view.pick(t.steps.z)[i];
  const softmaxLine = row(null, mo("="), softmax, mo("("), vector(masked), mo(")"), mi("V"),
    mo("="), vector(weights, 3), mi("V"));
  const result = row(null, mo("="), sub(mi("Σ"), "j"), sub(mi("w"), "j"), sub(mi("v"), "j"),
    mo("="), vector(z, 3));
  const legend = document.createElement("p");
  legend.className = "hint";
  legend.textContent = `Query “${tok}”; K and V have ${st.S} rows (one per key). ` +
    (standard ? `√d_k = √${dk}.` : unit ? "Scaling is off." : `scale = ${fmt(st.scale, 3)}.`) +
    (t.steps.biased ? ` b_${tok}: the bias row (ALiBi or a position bias).` : "") +
    (t.steps.sink ? " softmax₊sink: a sink logit joins the denominator; it takes weight and " +
                    "gives no value." : "");
  const math = m("math", { display: "block" },
    m("mtable", {}, symbolic, withNumbers, softmaxLine, result));
  box.replaceChildren(math, legend);
}
