// The "real model" mode: a sentence through MiniLM, SmolLM2 or a directory the server was
// started with (POST /api/model/trace), the layers × heads grid of attention thumbnails, and
// the clicked head in the scenes' own panels (render.js). Every number comes from the server; this file asks, lays out and draws.
import { api, limits } from "./api.js";
import * as why from "./attribute.js";
import { $, disable, h } from "./dom.js";
import { gridTable, markGrid } from "./grid.js";
import * as longText from "./modelzoom.js";
import { opened, shown } from "./mode.js";
import { render } from "./render.js";
import * as overlay from "./taxonomy.js";
import * as whatif from "./whatif.js";

const URL_TEXT = 2000;  // characters of text the URL keeps
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
let served = [];      // GET /api/model/runs: saved runs the server opens (qkv serve --trace)
let grid = null;      // {key, shape, bytes, sqrt} of the last run's pooled thumbnails
let zoom = null;      // the zooming heatmap's panel (modelzoom.js)
let traced = null;    // the last trace job: {run, tokens, ...}
let answer = null;    // the last POST /api/model/trace answer
let asked = 0;        // request counter: only the latest answer is painted
let tracing = 0;      // trace counter: only the latest text is shown
let paints = 0;
let bounds = null;    // GET /api/limits
const saved = {};     // what the scenes' page showed where this mode writes

export const active = () => shown() === "model";

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
      onchange: (e) => { $("lesson").textContent = note(e.target.value); context(); } })),
    h("label", { class: "grow" }, "text ", h("textarea", {
      id: "model-text", rows: 2, maxlength: bounds.model_text_chars, spellcheck: "false",
      "aria-label": "text (up to the model's context)", placeholder: DEFAULT_TEXT })),
    h("button", { type: "submit", id: "model-run" }, "run"),
    h("span", { class: "hint", id: "model-context" }, "up to the model's context"),
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
      `Limits: the text up to the model's context; the panels below print every number for `,
      `texts of at most ${bounds.model_page_tokens} tokens (longer ones: the zooming heatmap); `,
      "X (d_model wide) and the weight ",
      "matrices W_Q, W_K, W_V, W_O ",
      "are not shown — too wide to read (the walkthrough prints X's first 8 columns); τ = 1 ",
      "and the model's own scale and mask; thumbnails are rounded to 1/255, the panels below ",
      "hold the exact float32 numbers."));
  document.querySelector("main").prepend(panel);
  zoom = longText.install(panel, { onSelect: pickQuery, onError: (m) => status(m, true) });
  overlay.install(panel, () => drawGrid());
  whatif.install(panel);
  why.install(panel, pick);
}

async function fillModels() {
  info = await api("/api/models");
  served = await api("/api/model/runs");
  const own = info.find((m) => m.local);  // started with --model DIR: that model first
  if (own) state.model = own.name;
  const saved = served.filter((r) => !info.some((m) => m.name === r.model));
  $("model-name").replaceChildren(...info.map((m) => new Option(m.name, m.name)),
    ...saved.map((r) => new Option(`${r.model} (saved run)`, r.model)));
  $("model-name").value = state.model;
  context();
}

// the chosen model's limits, as GET /api/models says them
function context() {
  const m = info.find((x) => x.name === $("model-name").value);
  $("model-text").maxLength = m?.max_chars ?? bounds.model_text_chars;
  $("model-context").textContent = m?.max_tokens
    ? `up to ${m.max_tokens.toLocaleString("en")} tokens (${m.name}'s context)`
    : "up to the model's context";
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
  $("panel-zoom").hidden = !model || !traced;
  $("panel-whatif").hidden = !model || long();
  $("panel-why").hidden = !model || long();
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
  if (traced) { if (answer) paint(); else paintLong(); } else await runText();
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
  await trace();
}

// Trace the text (a job with a progress bar), then show the selected head: the zooming
// heatmap always, the panels that print every number when the text is short enough.
async function trace(message) {
  const n = ++tracing;
  const loaded = info.find((m) => m.name === state.model)?.n_layers != null;  // sizes: loaded
  const own = served.find((r) => r.model === state.model && r.text === state.text);
  disable($("model-run"), `running ${state.model} on this text…`);
  status(own ? "opening the saved run…" : message || (loaded ? `running ${state.model}…` :
    `loading ${state.model} (a few seconds the first time), then running it…`));
  const key = `${state.model}|${state.text}`;
  if (own && !own.layers.includes(state.layer)) state.layer = own.layers[0];
  try {
    const job = await zoom.trace(state.model, state.text, own);
    if (!job || n !== tracing) return;
    info = await api("/api/models");  // the model is loaded now: its sizes are known
    context();
    if (state.select === null) state.select = job.tokens - 1;
    await zoom.show(state.layer, state.head, state.select);  // the server checks all three
    if (n !== tracing) return;
    traced = { ...job, key, served: Boolean(own) };
    document.body.dataset.long = long() ? "true" : "false";
    $("panel-zoom").hidden = false;
    $("panel-whatif").hidden = long();
    $("panel-why").hidden = long();
    const tokens = job.tokens.toLocaleString("en");
    zoom.note(own ? `A saved run (${tokens} tokens, ${own.layers.length} layers): its weights ` +
      "are computed from the file's q and k, and shown here alone." : long() ? `This text has ` +
      `${tokens} tokens: the panels that print every number show texts of at most ` +
      `${bounds.model_page_tokens}, so its weights are shown here alone.` : "");
    if (long()) paintLong(); else { await pool(); await ask(); }
    if (n === tracing) status("");
  } catch (e) {
    if (n === tracing) status(`the server refused this: ${e.message}`, true);
  } finally {
    if (n === tracing) disable($("model-run"), "");
  }
}

// whether the traced text is too long for the panels that print every number (a saved run is
// shown by the zooming heatmap alone: those panels would run the model again)
const long = () => Boolean(traced && (traced.served || traced.tokens > bounds.model_page_tokens));

// The panels' answer for the selected head and query. Latest wins: an answer that a newer
// question overtook is dropped.
async function ask() {
  const n = ++asked;
  try {
    const data = await api("/api/model/trace", {
      model: state.model, text: state.text, layer: state.layer, head: state.head,
      select: state.select, grid: false });
    if (n !== asked) return;
    const known = info.find((m) => m.name === data.model.name);
    if (known) Object.assign(known, data.model);
    answer = data;
    paint();
  } catch (e) {
    if (n === asked) status(`the server refused this: ${e.message}`, true);
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
  if (long()) return paintLong();
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

// A long text: the zooming heatmap and the grid stand for the panels.
function paintLong() {
  if (!active()) return;
  drawGrid();
  $("lesson").textContent = note(state.model);
  writeURL();
  paints += 1;
  document.body.dataset.modelRenders = String(paints);
}

function choose(i) {
  state.select = i;
  zoom.select(i);
  ask();
}

// a query picked on the zooming heatmap
function pickQuery(q) {
  state.select = q;
  if (long()) writeURL(); else ask();
}

function setStage(stage) {
  state.stage = stage;
  paint();
}

function pick(layer, head) {
  state.layer = layer;
  state.head = head;
  zoom.show(layer, head, state.select);
  if (long()) paintLong(); else ask();
}

// The grid's thumbnails, pooled by the server when asked: at once for a short text, on the
// button for a long one (every head of every layer: most of a minute at 2,048 tokens).
async function pool() {
  const key = traced.key;
  try {
    const thumbs = await zoom.thumbnails();
    if (!thumbs) return;
    grid = { key, shape: thumbs.header.shape, bytes: thumbs.data, sqrt: true,
             layers: thumbs.header.layers };
    if (key === traced?.key && active()) drawGrid();
  } catch (e) {
    status(`the server refused this: ${e.message}`, true);
  }
}

function drawGrid() {
  const box = $("grid");
  if (!grid || grid.key !== traced?.key) {
    const button = h("button", { type: "button", id: "grid-pool", onclick: () => {
      disable(button, "pooling every head…");
      pool();
    } }, "show every head's thumbnail");
    box.replaceChildren(long() ? h("p", { class: "hint" }, button, " pools every head of every ",
      "layer to 64 × 64 (a few seconds a layer at a few thousand tokens)")
      : h("p", { class: "hint" }, "the thumbnails appear once every head is pooled…"));
    delete box.dataset.key;
    return;
  }
  const key = grid.key;
  if (box.dataset.key !== key) {
    box.dataset.key = key;
    box.replaceChildren(gridTable(grid, pick, grid.layers));
  }
  markGrid(box, state.layer, state.head);
  $("grid-title").textContent = `· ${state.model}, ${traced.tokens} tokens · ` +
    `selected: layer ${state.layer}, head ${state.head}`;
  overlay.paint(box, state.model, () => drawGrid());
}

// ---- URL -----------------------------------------------------------------------------------

function writeURL() {
  const p = new URLSearchParams({ mode: "model", model: state.model, layer: String(state.layer),
                                  head: String(state.head) });
  if (state.text.length <= URL_TEXT) p.set("text", state.text);  // a long text stays out
  if (state.select !== null) p.set("token", String(state.select));
  history.replaceState(null, "", `${location.pathname}?${p}`);
}

function readURL() {
  const p = new URLSearchParams(location.search);
  const int = (v) => (v !== null && /^\d+$/.test(v) ? Number(v) : null);
  const names = [...info.map((m) => m.name), ...served.map((r) => r.model)];
  if (names.includes(p.get("model"))) state.model = p.get("model");
  if (p.get("text")) state.text = p.get("text").slice(0, bounds.model_text_chars);
  state.layer = int(p.get("layer")) ?? 0;
  state.head = int(p.get("head")) ?? 0;
  state.select = int(p.get("token"));
}

async function start() {
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
  readURL();
  const own = served[0];  // a saved run the server was started with: opened unless the URL
  if (own && !new URLSearchParams(location.search).get("text")) {  // names a text
    Object.assign(state, { model: own.model, text: own.text });
  } else if (opened !== "model") { show(false); return; }
  show(true);
  $("model-name").value = state.model;
  $("model-text").value = state.text;
  // a shared URL: its layer, head and token are checked; if one is refused, the text is
  // shown from layer 0, head 0, its last token (the error stays visible)
  await trace(`loading ${state.model} (a few seconds the first time), then running it…`);
  if (!traced) {
    const why = $("error").textContent;
    Object.assign(state, { layer: 0, head: 0, select: null });
    await trace(`running ${state.model}…`);
    if (traced && why) status(`${why} — showing layer 0, head 0 instead`, true);
  }
}

start();
