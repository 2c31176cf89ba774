// Paints one API answer into the panels built by panels.js inside a root element. It formats
// and lays out numbers; it computes none, fetches nothing and keeps its memory per root, so a
// page, a notebook widget or an exported file can each hold their own copy of the panels.
//
//   render(root, result, ctx)
//     result: a POST /api/trace answer {scene, settings, trace, selected, walkthrough}
//     ctx: {steps,               the trace's step names (GET /api/limits .steps)
//           state: {stage},      the heatmap's stage ("scores" … "weights")
//           scene, edits, editsVersion, maxAbs,   editable X and W (scene null: none)
//           onSelect(i), onStage(name), onEdit(field, path, value), onError(message)}
import { renderDiagram } from "./diagram.js";
import { $ as byId, deep, fmt, h, vec } from "./dom.js";
import { matrixEditor } from "./editors.js";
import { renderFormula } from "./formula.js";
import { renderHeatmap } from "./heatmap.js";
import { renderMix } from "./mix.js";

export { stagesOf } from "./heatmap.js";
const cache = new WeakMap();
const memos = new WeakMap();  // root -> what was last built there

function memo(root) {
  if (!memos.has(root)) memos.set(root, { editorsKey: null, qkvKey: null, latest: null, hot: null });
  return memos.get(root);
}

function decoded(result) {
  if (!cache.has(result)) {
    const t = result.trace;
    const steps = Object.fromEntries(Object.entries(t.steps).map(([k, a]) => [k, deep(a.data)]));
    cache.set(result, { steps, mask: t.mask ? t.mask.data : null, settings: t.settings });
  }
  return cache.get(result);
}

export function render(root, result, ctx) {
  const $ = (id) => byId(id, root);
  const mem = memo(root);
  const t = decoded(result);
  const { settings: s } = result;
  const H = t.settings.n_heads;
  const head = s.head;
  const kvHead = H ? Math.floor(head / (H / t.settings.n_kv_heads)) : null;
  const pick = (a) => (H ? a[head] : a);
  const pickKV = (a) => (H ? a[kvHead] : a);
  const view = {
    i: s.select, tokens: result.scene.tokens, pick, pickKV, H, head,
    maskRow: (r) => (t.mask ? t.mask[r] : null), $, mem,
  };
  const key = `${s.preset}|${head}|${ctx.editsVersion}`;
  if (key !== mem.editorsKey) {
    mem.editorsKey = key;
    renderTokens(view, ctx);
    if (ctx.scene) renderEditors(view, ctx);  // a real model (model.js) has no editable X, W
  }
  markTokens(view);
  renderQKV(view, t);
  renderDiagram(view, t, ctx);
  renderHeatmap(view, t, ctx);
  renderBars(view, t, result.selected);
  renderContrib(view, t, result.selected);
  renderMix($("mix"), view, t);
  renderHeads(view, t, result);
  renderFormula($("formula"), view, t);
  renderWalkthrough($("walkthrough"), result.walkthrough);
  const st = t.settings;
  $("sizes").textContent = `this scene: L = ${st.L} queries, S = ${st.S} keys, d_model = ` +
    `${result.scene.d_model}, d_k = ${st.d_k}, d_v = ${st.d_v}` +
    (H ? `, ${H} heads` : "") + `, scale = ${fmt(st.scale, 3)}, τ = ${fmt(st.temperature, 3)}.`;
  const where = H ? ` (head ${head})` : "";
  $("w-head").textContent = where;
  $("qkv-head").textContent = where;
}

// ---- tokens and editors (rebuilt only when the scene, head or edits reset) ---------------------

function renderTokens(view, ctx) {
  const { $ } = view;
  const box = $("tokens");
  box.replaceChildren(...view.tokens.map((tok, j) => h("button", {
    type: "button", class: "token", dataset: { index: j },
    onclick: () => ctx.onSelect(j),
    onkeydown: (e) => {
      const step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[e.key];
      if (!step) return;
      e.preventDefault();
      const next = (j + step + view.tokens.length) % view.tokens.length;
      box.children[next].focus();
      ctx.onSelect(next);
    },
  }, tok)));
}

function markTokens(view) {
  const { $ } = view;
  [...$("tokens").children].forEach((b, j) => {
    b.classList.toggle("selected", j === view.i);
    b.setAttribute("aria-pressed", j === view.i ? "true" : "false");
    b.tabIndex = j === view.i ? 0 : -1;
  });
}

function renderEditors(view, ctx) {
  const { $ } = view;
  const data = (field) => ctx.edits[field] || ctx.scene[field];
  const common = { onEdit: null, onError: ctx.onError };
  const editor = (field, label, matrix, rowLabels, prefix) => matrixEditor({
    ...common, field, label, matrix, rowLabels, prefix, maxAbs: ctx.maxAbs,
    onEdit: (path, value) => ctx.onEdit(field, path, value) });
  $("x-editor").replaceChildren(editor("x", "X", data("x"), view.tokens, []));
  const h0 = view.H ? view.head : 0;
  const ws = ["W_Q", "W_K", "W_V"].map((f) => editor(f, f, data(f)[h0], null, [h0]));
  if (view.H) ws.push(editor("W_O", "W_O", data("W_O")[h0], null, [h0]));
  $("w-editors").replaceChildren(...ws);
}

// ---- q, k, v ----------------------------------------------------------------------------------

function table(label, matrix, rowLabels, highlight, digits = 2) {
  const cols = matrix[0] ? matrix[0].length : 0;
  return h("table", { class: "matrix", "data-step": label },
    h("caption", {}, label),
    h("thead", {}, h("tr", {}, h("th", { class: "corner" }),
      ...Array.from({ length: cols }, (_, c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, matrix.map((row, r) => h("tr", { class: r === highlight ? "selected" : null },
      h("th", { scope: "row" }, rowLabels[r]),
      ...row.map((v) => h("td", { dataset: { value: v } }, fmt(v, digits)))))));
}

function renderQKV(view, t) {
  const { $, mem } = view;
  const q = view.pick(t.steps.q), k = view.pickKV(t.steps.k), v = view.pickKV(t.steps.v);
  const key = JSON.stringify([view.i, view.tokens, q, k, v]);  // τ, mask, scale leave them be
  if (key === mem.qkvKey) return;
  mem.qkvKey = key;
  $("qkv-tables").replaceChildren(table("q", q, view.tokens, view.i),
    table("k", k, view.tokens, view.i), table("v", v, view.tokens, view.i));
}

// ---- the selected row: weights, contributions -------------------------------------------------

function renderBars(view, t, sel) {
  const { $ } = view;
  const w = view.pick(t.steps.weights)[view.i];
  const mask = view.maskRow(view.i);
  const box = $("bars");
  const shape = JSON.stringify([view.tokens, view.i]);
  if (box.dataset.shape !== shape) {
    box.dataset.shape = shape;
    box.replaceChildren(...w.map((_, j) => h("div", {
      class: `bar${j === view.i ? " self" : ""}`, dataset: { key: j } },
      h("span", { class: "label" }, view.tokens[j]),
      h("span", { class: "track" }, h("span", { class: "fill" })),
      h("span", { class: "value" }))));
  }
  box.querySelectorAll(".bar:not(.sink)").forEach((bar, j) => {
    const hidden = Boolean(mask && !mask[j]);
    bar.dataset.weight = String(w[j]);
    bar.classList.toggle("masked", hidden);
    bar.querySelector(".fill").style.width = `${(100 * w[j]).toFixed(2)}%`;
    bar.querySelector(".value").textContent = hidden ? "0 · masked" : fmt(w[j], 3);
  });
  const sink = t.steps.sink ? view.pick(t.steps.sink)[view.i][0] : null;
  let sinkBar = box.querySelector(".bar.sink");
  if (sink === null) sinkBar?.remove();
  else {
    if (!sinkBar) {
      sinkBar = h("div", { class: "bar sink", title: "the sink takes weight and gives no value" },
        h("span", { class: "label" }, "sink"),
        h("span", { class: "track" }, h("span", { class: "fill" })),
        h("span", { class: "value" }));
      box.append(sinkBar);
    }
    sinkBar.dataset.weight = String(sink);
    sinkBar.querySelector(".fill").style.width = `${(100 * sink).toFixed(2)}%`;
    sinkBar.querySelector(".value").textContent = fmt(sink, 3);
  }
  const item = (term, value, id) => [h("dt", {}, term), h("dd", { id }, value)];
  $("weight-stats").replaceChildren(
    ...item("Σ weights", fmt(sel.weights_sum, 3), "weights-sum"),
    ...(sel.sink == null ? [] : item("+ sink", `${fmt(sel.sink, 3)} → Σ = ` +
                                     `${fmt(sel.sum_with_sink, 3)}`, "with-sink")),
    ...item("entropy", `${fmt(sel.entropy, 3)} nats`, "entropy"),
    ...item("effective tokens", `exp(entropy) = ${fmt(sel.effective_tokens, 2)} of ` +
            `${sel.visible_keys} visible`, "effective"));
}

function renderContrib(view, t, sel) {
  const { $ } = view;
  const w = view.pick(t.steps.weights)[view.i];
  const v = view.pickKV(t.steps.v);
  const z = view.pick(t.steps.z)[view.i];
  const terms = sel.contributions;  // (S, d_v)
  const dims = z.map((_, d) => h("th", { scope: "col" }, `w·v[${d}]`));
  const body = terms.map((row, j) => h("tr", { class: j === view.i ? "selected" : null },
    h("th", { scope: "row" }, view.tokens[j]), h("td", {}, fmt(w[j], 3)),
    h("td", { class: "vector" }, vec(v[j])),
    ...row.map((x) => h("td", { dataset: { value: x } }, fmt(x, 3)))));
  const total = h("tr", { class: "total" }, h("th", { scope: "row" }, `z[${view.tokens[view.i]}]`),
    h("td", {}, ""), h("td", { class: "vector" }, "Σ over keys →"),
    ...z.map((x, d) => h("td", { dataset: { value: x }, id: `z-${d}` }, fmt(x, 3))));
  $("contrib").replaceChildren(h("table", { class: "matrix contrib" },
    h("thead", {}, h("tr", {}, h("th", { class: "corner" }, "key j"), h("th", {}, "w_j"),
      h("th", {}, "v_j"), ...dims)),
    h("tbody", {}, body, total)));
}

function renderHeads(view, t, result) {
  const { $ } = view;
  $("panel-heads").hidden = !view.H;
  if (!view.H) return;
  const i = view.i;
  const rows = t.steps.z.map((zh, hh) => h("tr", { class: hh === view.head ? "selected" : null },
    h("th", { scope: "row" }, `head ${hh}`), h("td", { class: "vector" }, vec(zh[i])),
    h("td", { class: "vector" }, vec(t.steps.head_out[hh][i]))));
  $("heads").replaceChildren(h("table", { class: "matrix heads" },
    h("thead", {}, h("tr", {}, h("th", { class: "corner" }, view.tokens[i]),
      h("th", {}, "z (d_head)"), h("th", {}, "head_out = z·W_O^h (d_model)"))),
    h("tbody", {}, rows, h("tr", { class: "total" }, h("th", { scope: "row" }, "out"),
      h("td", {}, "Σ_h head_out + b_O ="),
      h("td", { class: "vector", id: "out-row" }, vec(t.steps.out[i]))))));
}

function renderWalkthrough(box, sections) {
  box.replaceChildren(...sections.map((sec) => h("div", { class: "section" },
    h("h3", {}, sec.title), h("pre", {}, sec.lines.join("\n")))));
}
