// The simulator page: state, URL, controls and the API round trip. Every number shown comes
// from the server's engine (POST /api/trace); this file only asks and hands the answer to render.
// The API's bounds and step names come from GET /api/limits, asked once at start-up.
import { api, limits } from "./api.js";
import { $, disable } from "./dom.js";
import { shown } from "./mode.js";  // the mode the URL asks for, set before any answer
import { buildPanels } from "./panels.js";
import * as predict from "./predict.js";    // predict-then-reveal; listens for "qkv:rendered"
import * as practice from "./practice.js";  // the practice panel (exercises checked by the server)
import { render, stagesOf } from "./render.js";

// The τ slider is logarithmic over a span chosen for reading (inside the API's [tau_min, tau_max]).
const SLIDER_TAU = [0.05, 10], SLIDES = 1000;
let tauLo = SLIDER_TAU[0], tauHi = SLIDER_TAU[1];
let bounds = null;  // GET /api/limits

export const sliderToTau = (s) =>
  Number((tauLo * Math.pow(tauHi / tauLo, s / SLIDES)).toPrecision(3));
const tauToSlider = (t) =>
  Math.round(SLIDES * Math.log(t / tauLo) / Math.log(tauHi / tauLo));

buildPanels($("panels"));  // before model.js (the next module script) looks for them
// the optional steps' inputs sit beside the stage buttons they add (scenes only: see model.css)
$("panel-pipeline").insertBefore($("extra-steps"), $("stages"));
predict.install();
practice.install();

// The header stays on screen (sticky) only while it takes at most 15% of the window's height;
// a taller one (a phone, a long lesson) scrolls away with the page.
const HEADER_SHARE = 0.15;
function fitHeader() {
  const header = document.querySelector("header");
  header.classList.toggle("unstuck", header.offsetHeight > HEADER_SHARE * window.innerHeight);
}
new ResizeObserver(fitHeader).observe(document.querySelector("header"));
window.addEventListener("resize", fitHeader);

const state = {
  preset: null, select: null, tau: 1, scaled: null, causal: false, align: "bottom-right",
  head: 0, stage: "weights", softcap: null, sink: null, alibi: null,
};
const EXTRA_STEPS = ["softcap", "sink", "alibi"];  // optional steps: null = off
let presets = [];   // [{name, title, lesson, tokens, select, scaled, n_heads, d_model}]
let scene = null;   // the current preset's numbers, GET /api/presets/{name}
let edits = {};     // field -> the whole edited array, sent in place of the preset's
let result = null;  // the last POST /api/trace answer
let renders = 0;
let editsVersion = 0;  // bumped when the editable tables must be rebuilt

function showError(message) {
  if (shown() === "model") return;  // the model mode owns the box then
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

// ---- URL ------------------------------------------------------------------------------------

function readURL() {
  const p = new URLSearchParams(location.search);
  const names = presets.map((s) => s.name);
  state.preset = names.includes(p.get("preset")) ? p.get("preset") : names[0];
  const int = (v) => (v !== null && /^\d+$/.test(v) ? Number(v) : null);
  state.select = int(p.get("token"));
  const tau = Number(p.get("tau"));
  state.tau = p.has("tau") && tau >= tauLo && tau <= tauHi ? tau : 1;
  state.scaled = p.has("scaled") ? p.get("scaled") === "1" : null;
  const causal = p.get("causal");
  state.causal = causal === "bottom-right" || causal === "top-left";
  state.align = state.causal ? causal : "bottom-right";
  const s = info();
  if (state.select !== null && state.select >= s.tokens.length) state.select = null;
  state.head = int(p.get("head")) ?? 0;
  if (state.head >= (s.n_heads || 1)) state.head = 0;
  state.stage = stagesOf(bounds.steps).includes(p.get("stage")) ? p.get("stage") : "weights";
  for (const name of EXTRA_STEPS) {
    const value = p.get(name) === null || p.get(name) === "" ? NaN : Number(p.get(name));
    state[name] = Number.isFinite(value) ? value : null;  // the server checks the range
  }
}

// Chromium throttles (and complains about) more than ~200 history updates per 10 s, which a
// dragged slider would exceed: the URL follows the state at most every URL_DELAY ms.
const URL_DELAY = 150;
let urlTimer = null;

function scheduleURL() {
  if (urlTimer === null) urlTimer = setTimeout(() => { urlTimer = null; writeURL(); }, URL_DELAY);
}

function writeURL() {
  const p = new URLSearchParams({ preset: state.preset, token: String(state.select),
                                  tau: String(state.tau) });
  if (state.scaled !== null) p.set("scaled", state.scaled ? "1" : "0");
  if (state.causal) p.set("causal", state.align);
  if (info().n_heads) p.set("head", String(state.head));
  if (state.stage !== "weights") p.set("stage", state.stage);
  for (const name of EXTRA_STEPS) if (state[name] !== null) p.set(name, String(state[name]));
  history.replaceState(null, "", `${location.pathname}?${p}`);
}

// ---- the round trip -------------------------------------------------------------------------

const info = () => presets.find((s) => s.name === state.preset);

function requestBody() {
  const body = { preset: state.preset, select: state.select, temperature: state.tau,
                 causal: state.causal, align: state.align, ...edits };
  if (state.scaled !== null) body.scaled = state.scaled;
  if (info().n_heads) body.head = state.head;
  for (const name of EXTRA_STEPS) if (state[name] !== null) body[name] = state[name];
  return body;
}

let inflight = false, queued = false;

// Latest wins: while one request is out, further changes are folded into the next one.
async function compute() {
  if (inflight) { queued = true; return; }
  inflight = true;
  try {
    do {
      queued = false;
      const body = requestBody();
      try {
        result = await api("/api/trace", body);
        showError("");
      } catch (e) {
        showError(`the server refused this state: ${e.message}`);
        continue;
      }
      if (!queued) paint();
    } while (queued);
  } finally {
    inflight = false;
  }
}

// Another mode (model.js) may own the panels: scenes paint only while they are shown.
const scenesShown = () => shown() === "scenes";

function paint() {
  if (!scenesShown()) return;
  state.select = result.settings.select;
  syncControls();
  scheduleURL();
  const t0 = performance.now();
  render($("panels"), result, context());
  document.body.dataset.renderMs = (performance.now() - t0).toFixed(2);
  renders += 1;
  document.body.dataset.renders = String(renders);
  document.body.dataset.tau = String(result.settings.temperature);
  document.dispatchEvent(new CustomEvent("qkv:rendered", { detail: { result } }));
}

// ---- controls -------------------------------------------------------------------------------

function syncControls() {
  const s = info();
  $("preset").value = state.preset;
  $("tau").value = String(tauToSlider(state.tau));
  $("tau-value").textContent = state.tau.toFixed(state.tau < 1 ? 3 : 2);
  $("scaled").checked = result ? result.settings.scaled : (state.scaled ?? s.scaled);
  disable($("scaled"), s.n_heads ? "a multi-head scene always scales by 1/√d_head" : "");
  $("causal").checked = state.causal;
  $("align").value = state.align;
  disable($("align"), state.causal ? "" : "turn causal on to choose how the mask is aligned");
  $("head-label").hidden = !s.n_heads;
  const head = $("head");
  if (s.n_heads && head.options.length !== s.n_heads) {
    head.replaceChildren(...Array.from({ length: s.n_heads },
      (_, h) => new Option(`head ${h}`, String(h))));
  }
  head.value = String(state.head);
  for (const name of EXTRA_STEPS) {
    if (document.activeElement !== $(name)) $(name).value = state[name] === null ? "" : String(state[name]);
  }
  if (EXTRA_STEPS.some((name) => state[name] !== null)) $("extra-steps").open = true;
  $("lesson").textContent = `${s.title} — ${s.lesson}`;
  $("notice").textContent = s.lesson;
}

function select(i) {
  state.select = i;
  compute();
}

function setStage(stage) {
  state.stage = stage;
  scheduleURL();
  render($("panels"), result, context());
}

const context = () => ({ steps: bounds.steps, maxAbs: bounds.max_abs, scene, edits, state,
                         editsVersion, onSelect: select, onStage: setStage, onEdit: edit,
                         onError: showError });

// An edited cell: field (x, W_Q, ...), index path, value already checked by render.
function edit(field, path, value) {
  if (!(field in edits)) edits[field] = structuredClone(scene[field]);
  let target = edits[field];
  for (const k of path.slice(0, -1)) target = target[k];
  target[path[path.length - 1]] = value;
  compute();
}

async function loadScene(name) {
  scene = await api(`/api/presets/${encodeURIComponent(name)}`);
  edits = {};
  editsVersion += 1;
}

function wire() {
  $("preset").addEventListener("change", async (e) => {
    state.preset = e.target.value;
    state.select = null;
    state.head = 0;
    state.scaled = null;
    await loadScene(state.preset);
    compute();
  });
  $("tau").addEventListener("input", (e) => {
    state.tau = sliderToTau(Number(e.target.value));
    $("tau-value").textContent = state.tau.toFixed(state.tau < 1 ? 3 : 2);
    compute();
  });
  $("scaled").addEventListener("change", (e) => { state.scaled = e.target.checked; compute(); });
  $("causal").addEventListener("change", (e) => { state.causal = e.target.checked; compute(); });
  $("align").addEventListener("change", (e) => { state.align = e.target.value; compute(); });
  $("head").addEventListener("change", (e) => { state.head = Number(e.target.value); compute(); });
  for (const name of EXTRA_STEPS) {
    $(name).addEventListener("change", (e) => {
      const text = e.target.value.trim();
      if (text !== "" && !Number.isFinite(Number(text))) {
        showError(`${e.target.getAttribute("aria-label")} must be a number, got “${text}”`);
        return;
      }
      state[name] = text === "" ? null : Number(text);
      compute();
    });
  }
  $("reset").addEventListener("click", () => {
    Object.assign(state, { select: null, tau: 1, scaled: null, causal: false,
                           align: "bottom-right", head: 0, stage: "weights", softcap: null,
                           sink: null, alibi: null });
    edits = {};
    editsVersion += 1;
    compute();
  });
  $("controls").addEventListener("submit", (e) => e.preventDefault());
  window.addEventListener("qkv:mode", () => {  // back from another mode: repaint everything
    editsVersion += 1;
    if (result && scenesShown()) paint();
  });
}

async function start() {
  try {
    [bounds, presets] = await Promise.all([limits(), api("/api/presets")]);
    tauLo = Math.max(SLIDER_TAU[0], bounds.tau_min);
    tauHi = Math.min(SLIDER_TAU[1], bounds.tau_max);
    $("tau").setAttribute("aria-label", `temperature τ (log scale ${tauLo}–${tauHi})`);
    $("tau").max = String(SLIDES);
    $("limit-tokens").textContent = String(bounds.max_scene_tokens);
    $("limit-dims").textContent = String(bounds.max_dims);
    $("preset").replaceChildren(...presets.map((s) => new Option(`${s.name} · ${s.title}`, s.name)));
    readURL();
    await loadScene(state.preset);
    syncControls();
    wire();
    await compute();
  } catch (e) {
    showError(`cannot start: ${e.message}`);
  }
}

start();
