// The model mode's long-text parts (model.js installs them): tracing a text up to the model's
// context as a job with a progress bar (POST /api/model/jobs, polled), and the zooming heatmap
// of the selected head (zoom.js) fed by the server's binary views (/api/model/overview, …).
import { ApiError } from "./api.js";
import { $, h } from "./dom.js";
import { zoomView } from "./zoom.js";
import { httpSource, unpack } from "./zoomdata.js";

const POLL_MS = 300;
const STEPS = ["weights", "masked", "tempered", "scaled", "scores"];

// A request whose answer is binary (a views.zoom payload) or JSON; errors as api.js's.
export async function post(path, body, as = "binary") {
  let res;
  try {
    res = await fetch(path, body === undefined ? {} : { method: "POST",
      headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(`cannot reach the server (${e.message})`, 0);
  }
  if (!res.ok) {
    let message = `${res.status} ${res.statusText}`;
    try { message = (await res.json()).message || message; } catch { /* not JSON */ }
    throw new ApiError(message, res.status);
  }
  return as === "json" ? res.json() : res.arrayBuffer();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tauOf = (slider) => Math.round(10 ** (Number(slider.value) / 500 - 1) * 1000) / 1000;

// Builds the panel after `after`; hooks: {onSelect(q), onError(message)}.
export function install(after, hooks) {
  const bar = h("progress", { id: "trace-progress", max: 1, value: 0, hidden: true });
  const said = h("span", { id: "trace-said", class: "hint", "aria-live": "polite" });
  const tau = h("input", { type: "range", id: "zoom-tau", min: 0, max: 1000, value: 500,
                           "aria-label": "temperature τ of the heatmap below" });
  const tauOut = h("output", { id: "zoom-tau-value", for: "zoom-tau" }, "1");
  const step = h("select", { id: "zoom-step", "aria-label": "step shown" },
    ...STEPS.map((s) => h("option", { value: s }, s)));
  const root = h("div", { id: "zoom-root" });
  const noted = h("p", { id: "zoom-note", class: "hint" });
  const panel = h("section", { id: "panel-zoom", class: "panel wide", hidden: true },
    h("h2", {}, h("code", {}, "weights"), " of the selected head, every query × every key ",
      h("span", { id: "zoom-title" })),
    h("p", { class: "zoom-progress" }, bar, " ", said),
    noted,
    h("p", { class: "zoom-controls" },
      h("label", {}, "τ ", tau, " ", tauOut), " ",
      h("label", {}, "step ", step),
      h("span", { class: "hint" }, " wheel or + − to zoom, drag or arrows to pan, click a row ",
        "to select its query; cells get their tokens and numbers once they are large enough")),
    root);
  after.after(panel);
  const st = { run: null, layer: 0, head: 0, view: null, polls: 0 };
  const params = () => ({ run: st.run, layer: st.layer, head: st.head, tau: tauOf(tau),
                          step: step.value });
  const refresh = () => st.view?.setSource(httpSource(post, "/api/model", params()))
    .catch(() => {});  // the view says why
  tau.addEventListener("input", () => { tauOut.textContent = String(tauOf(tau)); });
  tau.addEventListener("change", refresh);
  step.addEventListener("change", refresh);

  function progress(job) {
    const phase = job.phase === "thumbnails" ? "pooling the grid's thumbnails"
      : job.phase === "forward" ? "running the model" : job.phase;
    bar.hidden = job.state !== "running";
    bar.max = Math.max(1, job.total);
    bar.value = job.done;
    said.textContent = job.state === "failed" ? `tracing failed: ${job.message}`
      : job.state === "done" ? `${job.tokens.toLocaleString("en")} tokens traced`
      : `${phase}: layer ${job.done} of ${job.total} (${job.tokens.toLocaleString("en")} tokens)`;
    panel.dataset.phase = job.state === "running" ? job.phase : job.state;
  }

  // Trace (model, text): resolves with the job once the run can be read (null when a newer
  // trace() came first, which ends the polling of this one). ready: a job the server has done
  // already (a saved run it serves, GET /api/model/runs).
  async function trace(model, text, ready = null) {
    const n = ++st.polls;
    panel.hidden = false;
    let job = ready ?? await post("/api/model/jobs", { model, text }, "json");
    progress(job);
    while (!job.ready && job.state === "running") {
      await sleep(POLL_MS);
      if (n !== st.polls) return null;
      job = await post(`/api/model/jobs/${job.job}`, undefined, "json");
      progress(job);
    }
    if (n !== st.polls) return null;
    if (!job.ready) throw new ApiError(job.message || "tracing failed", 422);
    st.run = job.run;
    return job;
  }

  // The grid's thumbnails of the traced run: pooled on request (POST, asked again until done),
  // then fetched; null when a newer trace came first.
  async function thumbnails() {
    const [run, n] = [st.run, st.polls];
    let p = await post("/api/model/thumbnails", { run }, "json");
    const [before, phase] = [said.textContent, panel.dataset.phase];
    while (p.state === "pooling") {
      if (n !== st.polls) return null;
      said.textContent = `pooling the grid's thumbnails: layer ${p.done} of ${p.total}`;
      panel.dataset.phase = "thumbnails";
      await sleep(POLL_MS);
      p = await post("/api/model/thumbnails", { run }, "json");
    }
    if (p.state !== "done") throw new ApiError(p.message || "pooling failed", 422);
    if (n !== st.polls) return null;
    [said.textContent, panel.dataset.phase] = [before, phase];
    const got = unpack(await post(`/api/model/thumbnails?run=${run}`, undefined));
    return n === st.polls ? got : null;
  }

  // Show head (layer, head) of the traced run with query q selected.
  function show(layer, head, q) {
    Object.assign(st, { layer, head });
    $("zoom-title").textContent = `· layer ${layer}, head ${head}`;
    const source = httpSource(post, "/api/model", params());
    if (!st.view) {
      st.view = zoomView(root, source, { q, onSelect: hooks.onSelect, onError: hooks.onError });
      return st.view.ready;
    }
    return st.view.setSource(source, q);
  }

  const select = (q) => { if (st.view && q !== st.view.state.q) st.view.select(q); };
  const note = (text) => { noted.textContent = text; noted.hidden = !text; };
  return { panel, trace, thumbnails, show, select, note, state: st };
}
