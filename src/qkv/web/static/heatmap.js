// The pipeline heatmap (queries × keys at one stage, scores … weights) with its colour legend
// and a readout of the pointed, tapped or focused cell that follows every new answer.
import { fmt, h, rampColor, shade } from "./dom.js";

// The stages the heatmap shows, in the engine's order: "scores" … "weights".
export const stagesOf = (steps) => steps.slice(steps.indexOf("scores"), steps.indexOf("weights") + 1);

const STAGE_NOTES = {
  scores: "scores = q·kᵀ: how well each query matches each key.",
  scaled: "scaled = scores × scale (1/√d_k when scaling is on).",
  tempered: "tempered = scaled ÷ τ.",
  capped: "capped = cap·tanh(tempered ÷ cap): scores squashed into (−cap, cap), as Gemma 2 does.",
  biased: "biased = capped (or tempered) + bias: a number added per query and key (ALiBi, T5).",
  masked: "masked: hidden keys set to −∞, so softmax gives them 0.",
  weights: "weights = softmax of each row: positive, each row sums to 1.",
};
const READOUT = "point at, tap or focus a cell to read its value";
const WEIGHT_TICKS = [0, 0.05, 0.15, 0.3, 0.6, 1];

// Where a value sits on the colour ramp: weights by √w (so 0.05 and 0.15 look apart), the other
// stages linearly between the row-wide smallest and largest finite values.
function placer(stage, grid) {
  if (stage === "weights") return { at: (v) => Math.sqrt(Math.max(0, v)), ticks: WEIGHT_TICKS };
  const finite = grid.flat().filter(Number.isFinite);
  const lo = Math.min(...finite), hi = Math.max(...finite);
  const at = (v) => (hi > lo ? (v - lo) / (hi - lo) : 0);
  return { at, ticks: hi > lo ? [lo, (lo + hi) / 2, hi] : [lo] };
}

export function renderHeatmap(view, t, ctx) {
  const { $, mem } = view;
  mem.latest = ctx;
  const stages = $("stages");
  const box = $("heatmap");
  if (!stages.children.length) {
    stages.append(...stagesOf(ctx.steps).map((name) => h("button", {
      type: "button", role: "radio", dataset: { stage: name },
      onclick: () => mem.latest.onStage(name),  // the current mode's (scenes or model.js)
    }, name)));
    const point = (e) => {
      const cell = e.target.closest("td[data-label]");
      if (!cell) return;
      mem.hot = [cell.parentElement.rowIndex - 1, cell.cellIndex - 1];
      $("hover").textContent = cell.dataset.label;
    };
    box.addEventListener("mouseover", point);
    box.addEventListener("click", point);    // a tap
    box.addEventListener("focusin", point);  // the keyboard
    box.addEventListener("keydown", (e) => moveFocus(e, box));
  }
  // optional steps (capped, biased) have a button only while the trace holds them
  const stage = ctx.state.stage in t.steps ? ctx.state.stage : "weights";
  for (const b of stages.children) {
    b.hidden = !(b.dataset.stage in t.steps);
    b.setAttribute("aria-checked", b.dataset.stage === stage ? "true" : "false");
  }
  $("stage-note").textContent = STAGE_NOTES[stage];
  const grid = view.pick(t.steps[stage]);
  const place = placer(stage, grid);
  const shape = JSON.stringify([stage, view.tokens, view.i]);
  view.dense = view.tokens.length > 12;
  if (box.dataset.shape !== shape) {
    box.dataset.shape = shape;
    box.replaceChildren(heatTable(view, stage, grid.length));
    if (!mem.hot || mem.hot[0] >= grid.length || mem.hot[1] >= view.tokens.length) mem.hot = null;
  }
  const rows = box.querySelectorAll("tbody tr");
  const [hr, hc] = mem.hot || [view.i, 0];
  grid.forEach((row, r) => {
    const mask = view.maskRow(r);
    const cells = rows[r].children;
    row.forEach((v, c) => {
      const hidden = Boolean(mask && !mask[c]);
      const [bg, light] = shade(place.at(v));
      const td = cells[c + 1];
      const label = `${stage}[${view.tokens[r]} → ${view.tokens[c]}] = ${fmt(v, 4)}` +
                    (hidden ? " · masked" : "");
      td.dataset.value = String(v);
      td.dataset.label = label;
      td.title = label;
      td.tabIndex = r === hr && c === hc ? 0 : -1;
      td.classList.toggle("masked", hidden);
      td.classList.toggle("light", light && !hidden);
      td.style.background = !hidden && Number.isFinite(v) ? bg : "";
      if (!view.dense) td.textContent = fmt(v, 2);
    });
  });
  // the readout follows the answer: the cell it names shows its new value (never a stale one)
  $("hover").textContent = mem.hot ? rows[hr].children[hc + 1].dataset.label : READOUT;
  renderLegend($("legend"), stage, place);
}

// Arrow keys move the focus between cells (one tab stop for the whole table).
function moveFocus(e, box) {
  const step = { ArrowRight: [0, 1], ArrowLeft: [0, -1], ArrowDown: [1, 0], ArrowUp: [-1, 0] }[e.key];
  const cell = e.target.closest("td");
  if (!step || !cell) return;
  e.preventDefault();
  const rows = box.querySelectorAll("tbody tr");
  const r = Math.max(0, Math.min(rows.length - 1, cell.parentElement.rowIndex - 1 + step[0]));
  const cells = rows[r].querySelectorAll("td");
  const next = cells[Math.max(0, Math.min(cells.length - 1, cell.cellIndex - 1 + step[1]))];
  cell.tabIndex = -1;
  next.tabIndex = 0;
  next.focus();
}

function heatTable(view, stage, L) {
  const cols = view.tokens;
  const rows = Array.from({ length: L }, (_, r) => h("tr", { class: r === view.i ? "selected" : null },
    h("th", { scope: "row" }, view.tokens[r]), ...cols.map(() => h("td", {}))));
  return h("table", { class: `heat${view.dense ? " dense" : ""}`, "data-stage": stage,
                      "aria-label": `${stage}: queries down, keys across` },
    h("thead", {}, h("tr", {}, h("th", { class: "corner" }, "query ↓ key →"),
      ...cols.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows));
}

// The colour scale: a strip of the ramp with the values at its ticks.
function renderLegend(box, stage, place) {
  const key = JSON.stringify([stage, place.ticks]);
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  const strip = h("span", { class: "strip" });
  const stops = Array.from({ length: 11 }, (_, k) => `rgb(${rampColor(k / 10).join(", ")}) ${k * 10}%`);
  strip.style.background = `linear-gradient(to right, ${stops.join(", ")})`;
  const ticks = place.ticks.map((v) => {
    const tick = h("span", { class: "tick", dataset: { value: v } }, fmt(v, stage === "weights" ? 2 : 1));
    tick.style.left = `${(100 * place.at(v)).toFixed(1)}%`;
    return tick;
  });
  box.replaceChildren(h("span", { class: "legend-title" },
    stage === "weights" ? "weight (shade ∝ √weight)" : `${stage} (smallest → largest in the table)`),
    h("span", { class: "scale" }, strip, ...ticks),
    h("span", { class: "legend-masked" }, "masked"));
}
