// The "real model" mode: a sentence through MiniLM, SmolLM2 or a directory the server was
// started with (POST /api/model/trace), the layers × heads grid of attention thumbnails, and
// the clicked head in the scenes' own panels (render.js). Every number comes from the server; this file asks, lays out and draws.
import { api, limits } from "./api.js";
import * as why from "./attribute.js";
import { $, disable, h } from "./dom.js";
import { decodeGrid, gridTable, markGrid } from "./grid.js";
import { render } from "./render.js";
import * as overlay from "./taxonomy.js";
import * as whatif from "./whatif.js";

const DEFAULT_TEXT = "The cat sat on the mat because it was tired";
const MODEL_NOTES = {
  "minilm-l6": "MiniLM-L6 (BERT encoder): 6 layers × 12 heads, d_head 32, d_model 384; " +
    "q, k, v add biases (q = x·W_Q + b_Q); no mask — every token sees the whole sentence.",
  "smollm2-135m": "SmolLM2-135M (causal LM): 30 layers × 9 heads sharing 3 K/V heads, d_head 64, " +
    "d_model 576; q and k are rotated by RoPE; causal mask.",
};

// a directory the server was started with (qkv serve --model DIR): described from GET /api/models
const note = (name) => {
  const m = info.find((x) => x.name === name);
  if (MODEL_NOTES[name] || !m?.local) return MODEL_NOTES[name] || name;
  const kv = m.n_kv_heads !== m.n_heads ? ` sharing ${m.n_kv_heads} K/V heads` : "";
  return `${name} (a local transformers directory, computed by qkv's engine): ${m.n_layers} ` +
    `layers × ${m.n_heads} heads${kv}, d_head ${m.d_head}, d_model ${m.d_model}.`;
};

const state = { model: "smollm2-135m", text: DEFAULT_TEXT, layer: 0, head: 0, select: null,
                stage: "weights" };
let info = [];        // GET /api/models
let grid = null;      // {shape, bytes} of the last full run
let answer = null;    // the last POST /api/model/trace answer
let asked = 0;        // request counter: only the latest answer is painted
let paints = 0;
let bounds = null;    // GET /api/limits
const saved = {};     // what the scenes' page showed where this mode writes

export const active = () => document.body.dataset.mode === "model";

// " cat" -> "␣cat": edge spaces made visible, as the CLI prints them
export const visible = (t) => t.replace(/^ +| +$/g, (s) => "␣".repeat(s.length))
  .replace(/\n/g, "\\n").replace(/\t/g, "\\t");

function status(text, error = false) {
  const box = $("error");
  box.textContent = error ? text : "";
  box.hidden = !error;
  $("model-status").textContent = error ? "" : text;
}

// ---- the page parts this mode adds -------------------------------------------------------

function build() {
  const title = document.querySelector("header .title");
  let modes = $("modes");
  if (!modes) {
    modes = h("nav", { id: "modes", "aria-label": "mode" });
    title.append(modes);
  }
  if (!modes.querySelector('[data-mode="scenes"]')) {
    modes.append(h("button", { type: "button", dataset: { mode: "scenes" },
                               onclick: () => leave() }, "toy scenes"));
  }
  modes.append(h("button", { type: "button", id: "mode-model", dataset: { mode: "model" },
                             onclick: () => enter() }, "real model"));

  const form = h("form", { id: "model-controls", autocomplete: "off", hidden: true,
                           onsubmit: (e) => { e.preventDefault(); runText(); } },
    h("label", {}, "model ", h("select", {
      id: "model-name", "aria-label": "model",
      onchange: (e) => { $("lesson").textContent = note(e.target.value); } })),
    h("label", { class: "grow" }, "text ", h("input", {
      id: "model-text", type: "text", maxlength: bounds.model_max_chars, spellcheck: "false",
      "aria-label": `sentence (at most ${bounds.model_page_tokens} tokens)`,
      placeholder: DEFAULT_TEXT })),
    h("button", { type: "submit", id: "model-run" }, "run"),
    h("span", { class: "hint" }, `at most ${bounds.model_page_tokens} tokens`),
    h("span", { id: "model-status", class: "hint", "aria-live": "polite" }));
  $("controls").after(form);

  const panel = h("section", { id: "panel-grid", class: "panel wide", hidden: true },
    h("h2", {}, h("code", {}, "weights"), " of every layer and head ",
      h("span", { id: "grid-title" })),
    h("p", { class: "hint" }, "One thumbnail per head: queries down, keys across, darker = ",
      "more weight (shade ∝ √weight, so small weights still show). Click one to inspect it in ",
      "the panels below; click a token there to change the query."),
    h("div", { id: "grid", class: "scroll" }),
    h("p", { class: "hint", id: "model-limits" },
      `Limits: at most ${bounds.model_page_tokens} tokens; X (d_model wide) and the weight `,
      "matrices W_Q, W_K, W_V, W_O ",
      "are not shown — too wide to read (the walkthrough prints X's first 8 columns); τ = 1 ",
      "and the model's own scale and mask; thumbnails are rounded to 1/255, the panels below ",
      "hold the exact float32 numbers."));
  document.querySelector("main").prepend(panel);
  overlay.install(panel, () => drawGrid());
  whatif.install(panel);
  why.install(panel, pick);
}

async function fillModels() {
  info = await api("/api/models");
  const own = info.find((m) => m.local);  // started with --model DIR: that model first
  if (own) state.model = own.name;
  $("model-name").replaceChildren(...info.map((m) => new Option(m.name, m.name)));
  $("model-name").value = state.model;
}

// ---- entering and leaving ----------------------------------------------------------------

function show(model) {
  document.body.dataset.mode = model ? "model" : "scenes";
  for (const b of $("modes").children) {
    b.setAttribute("aria-pressed", String(b.dataset.mode === (model ? "model" : "scenes")));
  }
  $("controls").hidden = model;
  $("model-controls").hidden = !model;
  $("panel-grid").hidden = !model;
  $("panel-whatif").hidden = !model;
  $("panel-why").hidden = !model;
  $("panel-w").hidden = model;
  $("panel-notes").hidden = model;
  const hint = document.querySelector("#panel-x .hint");
  if (model) {
    saved.hint ??= hint.textContent;
    saved.lesson ??= $("lesson").textContent;
    hint.textContent = "Click a token (or focus it and press ← →) to make it the query.";
    $("lesson").textContent = note(state.model);
  } else {
    if (saved.hint !== undefined) hint.textContent = saved.hint;
    if (saved.lesson !== undefined) $("lesson").textContent = saved.lesson;
    delete saved.hint;
    delete saved.lesson;
  }
}

async function enter() {
  show(true);
  $("model-name").value = state.model;
  $("model-text").value = state.text;
  writeURL();
  if (answer) paint(); else await runText();
}

function leave() {
  show(false);
  status("");
  window.dispatchEvent(new CustomEvent("qkv:mode", { detail: "scenes" }));
}

// ---- the round trips ---------------------------------------------------------------------

async function runText() {
  const model = $("model-name").value;
  if (model !== state.model) Object.assign(state, { model, layer: 0, head: 0 });
  state.text = $("model-text").value.trim() || DEFAULT_TEXT;
  $("model-text").value = state.text;
  state.select = null;  // the last token of the new text
  const loaded = info.find((m) => m.name === state.model)?.n_layers != null;  // sizes: loaded
  await ask(true, loaded ? `running ${state.model}…` :
    `loading ${state.model} (a few seconds the first time), then running it…`);
}

// Latest wins: an answer that a newer question overtook is dropped. The grid comes along
// whenever the one on the page is not this sentence's.
async function ask(withGrid, message = "") {
  const n = ++asked;
  const key = `${state.model}|${state.text}`;
  withGrid = withGrid || !grid || grid.key !== key;
  disable($("model-run"), withGrid ? `running ${state.model} on this sentence…` : "");
  status(message || (withGrid ? `running ${state.model}…` : ""));
  try {
    const data = await api("/api/model/trace", {
      model: state.model, text: state.text, layer: state.layer, head: state.head,
      select: state.select, grid: withGrid });
    if (n !== asked) return;
    if (withGrid) grid = { key, ...decodeGrid(data.grid) };
    const known = info.find((m) => m.name === data.model.name);
    if (known) Object.assign(known, data.model);
    answer = data;
    status("");
    paint();
  } catch (e) {
    if (n === asked) status(`the server refused this: ${e.message}`, true);
  } finally {
    if (n === asked) disable($("model-run"), "");
  }
}

// ---- painting ------------------------------------------------------------------------------

function paint() {
  if (!active()) return;
  const s = answer.settings;
  Object.assign(state, { layer: s.layer, head: s.head, select: s.select });
  const tokens = answer.tokens.map(visible);
  const result = {
    scene: { tokens, d_model: answer.model.d_model },
    settings: { preset: `model|${s.model}|${s.layer}|${tokens.join("|")}`, select: s.select,
                head: s.head, temperature: 1 },
    trace: answer.trace, selected: answer.selected, walkthrough: answer.walkthrough,
  };
  render($("panels"), result, {
    steps: bounds.steps, scene: null, edits: {}, state, editsVersion: 0, onSelect: choose,
    onStage: setStage, onEdit: () => {}, onError: (m) => status(m, true) });
  drawGrid();
  whatif.update({ model: s.model, text: state.text, layer: s.layer, head: s.head, tokens });
  why.update({ model: s.model, text: state.text });
  const where = ` · layer ${s.layer}, head ${s.head}` +
    (answer.model.n_kv_heads !== answer.model.n_heads
      ? ` (K/V head ${Math.floor(s.head / (answer.model.n_heads / answer.model.n_kv_heads))})`
      : "");
  $("qkv-head").textContent = where + (s.model === "smollm2-135m" ? " · q, k after RoPE" : "");
  $("x-editor").replaceChildren(h("p", { class: "hint" },
    `X is ${tokens.length} × ${answer.model.d_model} (the layer's input): too wide to show ` +
    "here; the walkthrough below prints its first 8 columns."));
  $("lesson").textContent = note(s.model);
  writeURL();
  paints += 1;
  document.body.dataset.modelRenders = String(paints);
}

function choose(i) {
  state.select = i;
  ask(false);
}

function setStage(stage) {
  state.stage = stage;
  paint();
}

function pick(layer, head) {
  state.layer = layer;
  state.head = head;
  ask(false);
}

function drawGrid() {
  const L = grid.shape[2];
  const box = $("grid");
  const key = `${answer.settings.model}|${answer.tokens.join("|")}`;
  if (box.dataset.key !== key) {
    box.dataset.key = key;
    box.replaceChildren(gridTable(grid, pick));
  }
  markGrid(box, state.layer, state.head);
  $("grid-title").textContent = `· ${answer.settings.model}, ${L} tokens · ` +
    `selected: layer ${state.layer}, head ${state.head}`;
  overlay.paint(box, answer.settings.model, () => drawGrid());
}

// ---- URL -----------------------------------------------------------------------------------

function writeURL() {
  const p = new URLSearchParams({ mode: "model", model: state.model, text: state.text,
                                  layer: String(state.layer), head: String(state.head) });
  if (state.select !== null) p.set("token", String(state.select));
  history.replaceState(null, "", `${location.pathname}?${p}`);
}

function readURL() {
  const p = new URLSearchParams(location.search);
  const int = (v) => (v !== null && /^\d+$/.test(v) ? Number(v) : null);
  if (info.some((m) => m.name === p.get("model"))) state.model = p.get("model");
  if (p.get("text")) state.text = p.get("text").slice(0, bounds.model_max_chars);
  state.layer = int(p.get("layer")) ?? 0;
  state.head = int(p.get("head")) ?? 0;
  state.select = int(p.get("token"));
  return p.get("mode") === "model";
}

async function start() {
  const wanted = new URLSearchParams(location.search).get("mode") === "model";
  if (wanted) document.body.dataset.mode = "model";  // before the scenes' first paint
  try {
    bounds = await limits();
  } catch (e) {
    $("error").textContent = `cannot start the real-model mode: ${e.message}`;
    $("error").hidden = false;
    return;
  }
  build();
  try {
    await fillModels();
  } catch (e) {
    status(`cannot list the models: ${e.message}`, true);
    return;
  }
  if (!readURL()) { show(false); return; }
  show(true);
  $("model-name").value = state.model;
  $("model-text").value = state.text;
  // a shared URL: its layer, head and token are checked by the server; if it refuses them,
  // the sentence is shown from layer 0, head 0, its last token (the error stays visible)
  await ask(true, `loading ${state.model} (a few seconds the first time), then running it…`);
  if (!answer) {
    const why = $("error").textContent;
    Object.assign(state, { layer: 0, head: 0, select: null });
    await ask(true, `running ${state.model}…`);
    if (answer && why) status(`${why} — showing layer 0, head 0 instead`, true);
  }
}

start();
