// The selected token's path through attention, box by box, with the answer's own numbers:
//   x → q, k, v → q·kᵀ → ÷√d_k → ÷τ → mask → softmax → Σ wⱼvⱼ → z (→ W_O)
// and one plain-language line per role (query, key, value). Each box leads to its panel; the
// score boxes also switch the heatmap to their stage. Nothing is computed here.
import { fmt, h, vec } from "./dom.js";

const SHOWN = 6;  // entries per vector before "…"

// Scroll the root's panel into view (inside a page, a widget or an exported file alike).
const goTo = (view, panel) => view.$(panel)?.scrollIntoView({ behavior: "smooth", block: "start" });

function node(view, { step, title, formula, value, panel, stage, onStage }) {
  return h("li", { class: "node", dataset: { step } },
    h("button", {
      type: "button", class: "node-title", "aria-label": `${title}: show its panel`,
      onclick: () => { if (stage) onStage(stage); goTo(view, panel); },
    }, title),
    formula ? h("span", { class: "node-formula" }, formula) : null,
    h("span", { class: "node-value", dataset: { step } }, value));
}

export function renderDiagram(view, t, ctx) {
  const box = view.$("diagram");
  if (!box) return;
  const st = t.settings, i = view.i, tok = view.tokens[i];
  const row = (step) => view.pick(t.steps[step])[i];
  const standard = Math.abs(st.scale - 1 / Math.sqrt(st.d_k)) < 1e-12;
  const scaleTitle = standard ? "÷ √d_k" : st.scale === 1 ? "no scaling" : `× ${fmt(st.scale, 3)}`;
  const onStage = (stage) => view.mem.latest.onStage(stage);
  const nodes = [
    t.steps.x && { step: "x", title: "x", formula: `x[${tok}]`, value: vec(t.steps.x[i], 2, SHOWN),
                   panel: "panel-x" },
    { step: "qkv", title: "q, k, v", formula: `q[${tok}] = x·W_Q; every k, v`,
      value: vec(row("q"), 2, SHOWN), panel: "panel-qkv" },
    { step: "scores", title: "q·kᵀ", formula: "scores", value: vec(row("scores"), 2, SHOWN),
      panel: "panel-pipeline", stage: "scores" },
    { step: "scaled", title: scaleTitle, formula: standard ? `√${st.d_k} = √d_k` : "scaled",
      value: vec(row("scaled"), 2, SHOWN), panel: "panel-pipeline", stage: "scaled" },
    { step: "tempered", title: "÷ τ", formula: `τ = ${fmt(st.temperature, 3)}`,
      value: vec(row("tempered"), 2, SHOWN), panel: "panel-pipeline", stage: "tempered" },
    t.steps.capped && { step: "capped", title: "soft-cap", formula: `cap = ${fmt(st.softcap, 3)}`,
      value: vec(row("capped"), 2, SHOWN), panel: "panel-pipeline", stage: "capped" },
    t.steps.biased && { step: "biased", title: "+ bias", formula: "a number per key",
      value: vec(row("biased"), 2, SHOWN), panel: "panel-pipeline", stage: "biased" },
    { step: "masked", title: "mask", formula: view.maskRow(i) ? "hidden keys → −∞" : "no mask",
      value: vec(row("masked"), 2, SHOWN), panel: "panel-pipeline", stage: "masked" },
    { step: "weights", title: "softmax",
      formula: t.steps.sink ? `weights + sink ${fmt(row("sink")[0], 3)}, Σ = 1` : "weights, Σ = 1",
      value: vec(row("weights"), 3, SHOWN), panel: "panel-weights" },
    { step: "z", title: "Σ wⱼvⱼ → z", formula: `z[${tok}]`, value: vec(row("z"), 3, SHOWN),
      panel: "panel-z" },
    view.H && t.steps.head_out && { step: "head_out", title: "→ W_O", formula: "head_out = z·W_O",
      value: vec(row("head_out"), 2, SHOWN), panel: "panel-heads" },
  ].filter(Boolean);
  box.replaceChildren(
    roles(view, t),
    h("ol", { class: "flow", "aria-label": `the path of ${tok} through attention` },
      nodes.map((n) => node(view, { ...n, onStage }))));
}

// One line per role: the selected token asks (q), every token offers (k) and delivers (v).
function roles(view, t) {
  const i = view.i, tok = `‘${view.tokens[i]}’`;
  const w = view.pick(t.steps.weights)[i];
  const best = w.indexOf(Math.max(...w));
  const z = view.pick(t.steps.z)[i];
  return h("ul", { class: "roles" },
    h("li", { dataset: { role: "q" } }, h("b", {}, "query q · "),
      `${tok} asks with q = ${vec(view.pick(t.steps.q)[i], 2, SHOWN)}: what it is looking for.`),
    h("li", { dataset: { role: "k" } }, h("b", {}, "key k · "),
      "every token offers a key k; q·k says how well it answers. ",
      `${tok} gives the most weight to ‘${view.tokens[best]}’ (${fmt(w[best], 3)}).`),
    h("li", { dataset: { role: "v" } }, h("b", {}, "value v · "),
      "every token delivers a value v; ",
      `${tok} takes back z = Σ wⱼvⱼ = ${vec(z, 3, SHOWN)}.`));
}
