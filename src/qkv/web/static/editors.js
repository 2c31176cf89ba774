// Editable number tables for X and the weights. A cell accepts a plain number within the API's
// bounds (maxAbs: GET /api/limits .max_abs); anything else is marked invalid, reported, and
// never sent.
import { fmt, h } from "./dom.js";

export function parseCell(text, maxAbs) {
  const t = text.trim().replace(/\u2212/g, "-");
  if (!/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(t)) {
    return { error: `"${text}" is not a number` };
  }
  const v = Number(t);
  if (!Number.isFinite(v) || Math.abs(v) > maxAbs) {
    return { error: `${text} is outside [${fmt(-maxAbs, 0)}, ${fmt(maxAbs, 0)}]` };
  }
  return { value: v };
}

const show = (v) => (Number.isInteger(v * 100) ? v.toFixed(2) : String(v));

// A table of inputs for matrix (rows × cols); onEdit(path, value) with path = prefix + [r, c].
export function matrixEditor({ field, label, matrix, rowLabels, prefix, maxAbs, onEdit, onError }) {
  const cols = matrix[0].length;
  const head = h("tr", {}, h("th", { class: "corner" }),
    ...Array.from({ length: cols }, (_, c) => h("th", { scope: "col" }, c)));
  const rows = matrix.map((row, r) => h("tr", {},
    h("th", { scope: "row" }, rowLabels ? rowLabels[r] : r),
    ...row.map((v, c) => h("td", {}, h("input", {
      class: "cell", type: "text", inputmode: "decimal", value: show(v), size: 5,
      "aria-label": `${field}[${[...prefix, r, c].join("][")}]`,
      dataset: { field, path: JSON.stringify([...prefix, r, c]) },
      onchange: (e) => {
        const got = parseCell(e.target.value, maxAbs);
        e.target.classList.toggle("invalid", Boolean(got.error));
        e.target.setAttribute("aria-invalid", got.error ? "true" : "false");
        e.target.title = got.error || "";
        if (got.error) { onError(`${e.target.getAttribute("aria-label")}: ${got.error}`); return; }
        e.target.classList.add("edited");
        onEdit([...prefix, r, c], got.value);
      },
    })))));
  return h("table", { class: "matrix editor", "data-field": field },
    h("caption", {}, label), h("thead", {}, head), h("tbody", {}, rows));
}
