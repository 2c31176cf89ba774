// The "why this token" panel: which heads wrote a model's next token. Draws the panel that
// qkv.views.why computes (the page gets it from POST /api/model/attribute, the notebook widget
// and an exported file from Python): the layers × heads grid coloured by each head's signed
// share of the logit difference (or its patching score), a legend, the top heads, how the
// shares add up, and for the clicked head its share split by the key it read, with its weights
// row. Nothing is computed here but positions and colours; no fetch, no global state.
import { diverge, fmt, h } from "./dom.js";

const MAX_KEYS = 40;  // keys listed for one head; a longer prompt lists the largest |part|s
const signed = (v, digits = 3) => (v > 0 ? "+" : "") + fmt(v, digits);
// dom.js's diverging ramp paints negatives red; here red adds to the logit difference (as the
// PNG of qkv attribute draws it) and blue takes away
const colourOf = (v, [, m]) => diverge(-v / m);

// The panel as a section of its own (the notebook widget and an exported file).
export function whyPanel(panel, options = {}) {
  const box = h("div", { class: "why-box" });
  const section = h("section", { class: "panel wide why-panel" },
    h("h2", {}, "why this token? ", h("span", { class: "why-title" })), box);
  drawWhy(box, panel, options);
  return section;
}

// Draws ``panel`` into ``box`` (its children replaced). options.onPick(layer, head): also
// called when a head is clicked (the page selects it in its own panels).
export function drawWhy(box, panel, { onPick = null } = {}) {
  const view = { colour: panel.colour, head: null };
  const first = panel.top.find((t) => `${t.layer}.${t.head}` in panel.splits) ||
    panel.top[0] || null;
  const grid = h("div", { class: "why-grid-box scroll" });
  const legend = h("div", { class: "legend why-legend", "aria-label": "colour scale" });
  const top = h("ol", { class: "why-top" });
  const split = h("div", { class: "why-split", "aria-live": "polite" });
  const choose = h("select", { class: "why-colour", "aria-label": "colour heads by",
                               onchange: (e) => { view.colour = e.target.value; paint(); } },
    ...Object.keys(panel.grids).map((k) => new Option(k, k)));
  choose.value = view.colour;
  const title = box.closest?.(".why-panel")?.querySelector(".why-title");
  if (title) title.textContent = `· ${panel.quantity}`;
  box.replaceChildren(...[
    question(panel), shares(panel),
    panel.patching ? h("p", { class: "why-colour-row" },
      h("label", {}, "colour heads by ", choose), " ",
      h("span", { class: "hint" }, `patching from the corrupted prompt (${
        panel.patching.corrupted_tokens.length} tokens): LD clean ${fmt(panel.patching.clean, 3)}` +
        `, corrupted ${fmt(panel.patching.corrupted, 3)}`)) : null,
    grid, legend, h("h3", {}, "top heads"), top, split].filter(Boolean));
  paint();
  if (first) select(first.layer, first.head, false);

  function paint() {
    const g = panel.grids[view.colour];
    grid.replaceChildren(table(panel, g, view.colour, (l, hh) => select(l, hh, true)));
    legend.replaceChildren(...scaleLegend(g.range, panel.colours[view.colour]));
    top.replaceChildren(...panel.top.map((t) => h("li", {}, h("button", {
      type: "button", class: "why-top-head", dataset: { layer: t.layer, head: t.head },
      onclick: () => select(t.layer, t.head, true) },
      `layer ${t.layer}, head ${t.head}`),
      ` share ${signed(t.attribution)}`,
      t.patching === null ? "" : ` · patching ${signed(t.patching)}`)));
    mark();
  }

  function mark() {
    for (const b of box.querySelectorAll("button.why-cell, button.why-top-head")) {
      const on = view.head === `${b.dataset.layer}.${b.dataset.head}`;
      b.classList.toggle("selected", on);
      b.setAttribute("aria-pressed", String(on));
    }
  }

  function select(layer, head, clicked) {
    view.head = `${layer}.${head}`;
    mark();
    split.replaceChildren(...keySplit(panel, layer, head));
    box.dataset.head = view.head;
    if (clicked && onPick) onPick(layer, head);
  }
}

function question(panel) {
  const at = panel.tokens[panel.position];
  const base = panel.baseline ? ` rather than ${panel.baseline.label}` : "";
  return h("p", { class: "why-question" },
    "Why ", h("b", {}, panel.target.label), `${base} after “${at}” (token ${panel.position})? `,
    h("code", {}, panel.quantity), ` = ${fmt(panel.logit_diff, 3)}`);
}

// The shares that add up to the logit difference (the final norm's scale held fixed).
function shares(panel) {
  const s = panel.shares;
  const parts = [["embeddings", s.embed], ["heads", s.heads], ["MLPs", s.mlp], ["biases", s.rest]];
  return h("p", { class: "why-shares hint", dataset: { total: s.total } },
    parts.map(([name, v], k) => `${k ? " + " : ""}${name} ${fmt(v, 3)}`).join(""),
    ` = ${fmt(s.total, 3)}: each part read through the final norm with the real residual's ` +
    "scale held fixed, so the parts add up to the model's own logit difference.");
}

function table(panel, g, colour, onPick) {
  const [nLayers, nHeads] = panel.shape;
  const unit = colour === "patching" ? "patching" : "share";
  return h("table", { class: "why-grid" },
    h("thead", {}, h("tr", {}, h("th", { class: "corner" }, "head ↓ layer →"),
      ...Array.from({ length: nLayers }, (_, l) => h("th", { scope: "col" }, l)))),
    h("tbody", {}, Array.from({ length: nHeads }, (_, hh) => h("tr", {},
      h("th", { scope: "row" }, `h${hh}`),
      ...Array.from({ length: nLayers }, (_, l) => {
        const v = g.values[l][hh];
        const [bg, light] = colourOf(v, g.range);
        const cell = h("button", {
          type: "button", class: `why-cell${light ? " light" : ""}`,
          dataset: { layer: l, head: hh, value: v },
          title: `layer ${l}, head ${hh} · ${unit} ${signed(v)}`,
          "aria-label": `layer ${l}, head ${hh}, ${unit} ${signed(v)}`,
          onclick: () => onPick(l, hh) });
        cell.style.background = bg;  // (CSSOM: the page's CSP allows no style="")
        return h("td", {}, cell);
      })))));
}

function scaleLegend([lo, hi], words) {
  const strip = h("span", { class: "strip" });
  strip.style.background = `linear-gradient(to right, ${colourOf(lo, [lo, hi])[0]}, ` +
    `rgb(255, 255, 255), ${colourOf(hi, [lo, hi])[0]})`;
  const ticks = [[lo, 0], [0, 50], [hi, 100]].map(([v, at]) => {
    const t = h("span", { class: "tick" }, signed(v, 2));
    t.style.left = `${at}%`;
    return t;
  });
  return [h("span", { class: "scale" }, strip, ...ticks), h("span", {}, words)];
}

// One head's share split by the key it read: a row per key with its weight and its part.
function keySplit(panel, layer, head) {
  const s = panel.splits[`${layer}.${head}`];
  const value = panel.grids.attribution.values[layer][head];
  const heading = h("h3", {}, `layer ${layer}, head ${head}: share ${signed(value)}`);
  if (!s) {
    return [heading, h("p", { class: "hint why-unsplit" }, "This head's share was not split " +
      "by key: only the top heads' are (qkv attribute --top N; in Python, " +
      `qkv.hf.attribute(..., by_key=[(${layer}, ${head})])).`)];
  }
  let keys = s.keys;
  let note = "";
  if (keys.length > MAX_KEYS) {
    const kept = new Set([...keys].sort((a, b) => Math.abs(b.part) - Math.abs(a.part))
      .slice(0, MAX_KEYS).map((k) => k.key));
    keys = keys.filter((k) => kept.has(k.key));
    note = ` (the ${MAX_KEYS} keys with the largest parts of ${s.keys.length})`;
  }
  const m = s.range[1];
  const rows = keys.map((k) => {
    const weight = h("span", { class: "fill" });
    weight.style.width = `${(100 * Math.max(0, Math.min(1, k.weight))).toFixed(2)}%`;
    const part = h("span", { class: `fill ${k.part < 0 ? "neg" : "pos"}` });
    const w = 50 * Math.min(1, Math.abs(k.part) / m);
    part.style.width = `${w.toFixed(2)}%`;
    part.style.left = k.part < 0 ? `${(50 - w).toFixed(2)}%` : "50%";
    return h("div", { class: "why-key", dataset: { key: k.key, token: k.token, weight: k.weight,
                                                    part: k.part } },
      h("span", { class: "label", title: `key ${k.key}` }, k.token),
      h("span", { class: "track weight" }, weight),
      h("span", { class: "value" }, fmt(k.weight, 3)),
      h("span", { class: "track part" }, part),
      h("span", { class: "value" }, signed(k.part)));
  });
  return [heading,
    h("p", { class: "hint" }, "Each key j gives weight_j · (v_j W_O^h) · d: its attention ",
      "weight at the explained position (the head's pattern row) times what its value writes ",
      `onto the logit difference${note}.`),
    h("div", { class: "why-keys" },
      h("div", { class: "why-key why-key-head" }, h("span", {}, "key"), h("span", {}, "weight"),
        h("span", {}, ""), h("span", {}, "part (red adds, blue takes away)"), h("span", {}, "")),
      ...rows,
      h("div", { class: "why-key why-key-sum", dataset: { sum: s.sum } },
        h("span", { class: "label" }, "Σ parts"), h("span", {}), h("span", {}), h("span", {}),
        h("span", { class: "value" }, signed(s.sum))))];
}
