// A picture of z beside the values it mixes: one row per key (its weight as a bar, its value vⱼ
// as coloured cells), then z = Σ wⱼvⱼ on the same colour scale. Red is negative, blue positive.
import { diverge, fmt, h } from "./dom.js";

const NUMBERS_UP_TO = 8;  // wider vectors are drawn as colour only

function cells(values, top, numbers) {
  return values.map((x) => {
    const [bg, light] = diverge(top > 0 ? x / top : 0);
    const cell = h("span", { class: `mix-cell${light ? " light" : ""}`, title: fmt(x, 3),
                             dataset: { value: x } }, numbers ? fmt(x, 2) : "");
    cell.style.background = bg;
    return cell;
  });
}

export function renderMix(box, view, t) {
  if (!box) return;
  const i = view.i;
  const w = view.pick(t.steps.weights)[i];
  const v = view.pickKV(t.steps.v);
  const z = view.pick(t.steps.z)[i];
  const mask = view.maskRow(i);
  const top = Math.max(...v.flat().map(Math.abs), ...z.map(Math.abs));
  const numbers = z.length <= NUMBERS_UP_TO;
  const rows = v.map((vj, j) => {
    const hidden = Boolean(mask && !mask[j]);
    const bar = h("span", { class: "mix-fill" });
    bar.style.width = `${(100 * w[j]).toFixed(1)}%`;
    return h("div", { class: `mix-row${hidden ? " masked" : ""}`, dataset: { key: j } },
      h("span", { class: "mix-label" }, view.tokens[j]),
      h("span", { class: "mix-weight", title: `w = ${fmt(w[j], 3)}` }, bar,
        h("span", { class: "mix-w" }, hidden ? "masked" : `w ${fmt(w[j], 2)}`)),
      h("span", { class: "mix-cells" }, cells(vj, top, numbers)));
  });
  box.replaceChildren(
    h("div", { class: "mix-head" }, h("span", {}, "key j"), h("span", {}, "weight wⱼ"),
      h("span", {}, "value vⱼ")),
    ...rows,
    h("div", { class: "mix-row total" },
      h("span", { class: "mix-label" }, `z[${view.tokens[i]}]`),
      h("span", { class: "mix-w" }, "= Σ wⱼ·vⱼ"),
      h("span", { class: "mix-cells", id: "mix-z" }, cells(z, top, numbers))),
    h("p", { class: "hint" }, `Colour: red negative, white 0, blue positive, up to ±${fmt(top, 2)}. ` +
      "z leans toward the values of the keys with the longest weight bars."));
}
