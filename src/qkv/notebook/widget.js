// The notebook view (anywidget's render({model, el})): the simulator page's panels, built by
// the page's panels.js inside the view's shadow root and painted by its render.js from the
// payload Python computes. This file lays out controls and forwards clicks; every number comes
// from qkv's engine in Python (or, in an exported file, from the payloads computed before the
// file was written). Each view keeps its own elements; render.js keeps its memory per root.
import { $ as byId, fmt, h } from "../web/static/dom.js";
import { decodeGrid, gridTable, markGrid } from "../web/static/grid.js";
import { buildPanels } from "../web/static/panels.js";
import { render as paint } from "../web/static/render.js";
import { whyPanel } from "../web/static/why.js";

const TAU_MIN = 0.05, TAU_MAX = 10, STEPS = 1000;  // the τ slider is logarithmic, as the page's
const toTau = (s) => Number((TAU_MIN * Math.pow(TAU_MAX / TAU_MIN, s / STEPS)).toPrecision(3));
const toSlider = (t) => Math.round(STEPS * Math.log(t / TAU_MIN) / Math.log(TAU_MAX / TAU_MIN));
const tauText = (t) => fmt(t, t < 1 ? 3 : 2);
// The page's panels that have nothing to show here: the how-to names the page's own controls
// (scale, causal, editing, predict, practice), W has no editor, the notes describe toy scenes.
const HIDDEN = ["how-to", "panel-w", "panel-notes"];

// css: every stylesheet the view needs, scoped for a shadow root (bundle.py joins them).
export function render({ model, el, css }) {
  const root = el.shadowRoot || el.attachShadow({ mode: "open" });
  const $ = (id) => byId(id, root);
  const info = model.get("info");
  if (info.kind === "why") {  // qkv.show(attribution): the "why this token" panel alone
    root.replaceChildren(h("style", {}, css || ""), h("div", { class: "qkv-page" },
      h("main", {}, whyPanel(info.why))));
    return () => {};
  }
  const state = { stage: "weights" };
  const panels = buildPanels(h("main", {}));
  const page = h("div", { class: "qkv-page" },
    h("div", { class: "qkv-controls" },
      h("p", { class: "title" }, h("b", {}, info.title), " · ", h("span", { id: "words" }, info.words)),
      h("form", { id: "controls", autocomplete: "off", onsubmit: (e) => e.preventDefault() },
        tauControl(info.tau),
        info.layers ? h("label", {}, "layer ", h("select", { id: "layer", "aria-label": "layer" },
          info.layers.map((l) => new Option(`layer ${l}`, String(l))))) : null,
        info.n_heads ? h("label", {}, "head ", h("select", { id: "head", "aria-label": "head" },
          Array.from({ length: info.n_heads }, (_, k) => new Option(`head ${k}`, String(k))))) : null),
      h("p", { id: "lesson" }, info.lesson || ""),
      h("p", { id: "error", role: "alert", hidden: true })),
    panels);
  root.replaceChildren(h("style", {}, css || ""), page);
  for (const id of HIDDEN) if ($(id)) $(id).hidden = true;
  const hint = panels.querySelector("#panel-x .hint");
  if (hint) hint.textContent = "Click a token (or focus it and press ← →) to make it the query.";
  if (info.grid) panels.prepend(gridPanel(info));

  const send = (changes) => {
    for (const [k, v] of Object.entries(changes)) model.set(k, v);
    model.save_changes();
  };
  const tau = $("tau");
  if (tau && tau.type === "range") {
    tau.addEventListener("input", () => {
      const t = toTau(Number(tau.value));
      $("tau-value").textContent = tauText(t);
      send({ temperature: t });
    });
  } else if (tau) {
    tau.addEventListener("change", () => send({ temperature: Number(tau.value) }));
  }
  if ($("layer")) $("layer").addEventListener("change", (e) => send({ layer: Number(e.target.value) }));
  if ($("head")) $("head").addEventListener("change", (e) => send({ head: Number(e.target.value) }));

  const ctx = {
    steps: info.steps, scene: null, edits: {}, state, editsVersion: 0, maxAbs: null,
    onEdit: () => {},
    onSelect: (i) => send({ select: i }),
    onStage: (stage) => { state.stage = stage; draw(); },
    onError: (message) => showError(message),
  };
  function showError(message) {
    $("error").textContent = message || "";
    $("error").hidden = !message;
  }
  function draw() {
    const result = model.get("payload");
    if (!result || !result.trace) return;
    paint(panels, result, ctx);
    const st = result.settings;
    if (tau && tau.type === "range") {
      tau.value = String(toSlider(st.temperature));
      $("tau-value").textContent = tauText(st.temperature);
    } else if (tau) {
      tau.value = String(st.temperature);
    }
    if ($("layer")) $("layer").value = String(st.layer);
    if ($("head")) $("head").value = String(st.head ?? 0);
    if (info.grid) markSelected(root, st);
    const x = $("x-editor");
    if (x && !x.childElementCount) {
      x.append(h("p", { class: "hint" }, `X is ${info.tokens.length} × ${info.d_model ?? "d_model"}` +
        " (one row per token); the walkthrough below prints its first columns."));
    }
    $("words").textContent = info.words;
    showError(model.get("error"));
    page.dataset.renders = String(Number(page.dataset.renders || 0) + 1);
  }
  const onPayload = () => draw();
  const onError = () => showError(model.get("error"));
  model.on("change:payload", onPayload);
  model.on("change:error", onError);
  draw();
  return () => {
    model.off("change:payload", onPayload);
    model.off("change:error", onError);
  };

  function gridPanel(info) {
    const grid = decodeGrid(info.grid);
    return h("section", { id: "panel-grid", class: "panel wide" },
      h("h2", {}, h("code", {}, "weights"), " of every layer and head ", h("span", { id: "grid-title" })),
      h("p", { class: "hint" }, info.grid.note),
      h("div", { id: "grid", class: "scroll" },
        gridTable(grid, (layer, head) => send({ layer, head }), info.grid.layers)));
  }
}

function tauControl(tau) {
  if (tau.values) {  // an exported file: only the τ values it holds
    return h("label", { class: "tau" }, "τ ", h("select", { id: "tau", "aria-label": "temperature τ" },
      tau.values.map((t) => new Option(tauText(t), String(t)))),
      tau.values.length === 1 ? h("span", { class: "hint" }, tau.why) : null);
  }
  if (tau.fixed) {
    return h("span", { class: "tau fixed" }, `τ = ${tauText(tau.fixed)} `,
      h("span", { class: "hint", id: "tau-why" }, tau.why));
  }
  return h("label", { class: "tau" }, "τ ",
    h("input", { type: "range", id: "tau", min: 0, max: STEPS, step: 1,
                 "aria-label": "temperature τ (log scale 0.05–10)" }),
    h("output", { id: "tau-value", for: "tau" }, "1.00"));
}

function markSelected(root, st) {
  markGrid(root, st.layer, st.head);
  const title = byId("grid-title", root);
  if (title) title.textContent = `· selected: layer ${st.layer}, head ${st.head}`;
}
