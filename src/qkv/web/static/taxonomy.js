// The layers × heads grid's overlay: each head's previous-token, first-token, duplicate-token
// or induction score (GET /api/model/taxonomy: qkv.hf.taxonomy on repeated random tokens,
// measured once per model by the server) as a badge on its thumbnail, with a legend.
import { api } from "./api.js";
import { $, fmt, h } from "./dom.js";

const answers = {};  // model -> the taxonomy answer (or a promise of it)

export function install(panel, repaint) {
  const select = h("select", { id: "overlay-kind", "aria-label": "colour heads by",
                               onchange: repaint },
    new Option("nothing", ""), new Option("previous-token score", "previous"),
    new Option("first-token (sink) score", "first"),
    new Option("duplicate-token score", "duplicate"), new Option("induction score", "induction"));
  panel.querySelector("#grid").before(
    h("p", { class: "overlay" }, h("label", {}, "mark heads by ", select),
      h("span", { id: "overlay-legend", class: "hint", "aria-live": "polite" })));
}

export async function paint(box, model, repaint) {
  const kind = $("overlay-kind").value;
  const thumbs = box.querySelectorAll("button.thumb");
  if (!kind) {
    for (const b of thumbs) { b.querySelector(".badge")?.remove(); delete b.dataset.score; }
    $("overlay-legend").textContent = "";
    return;
  }
  if (!(model in answers)) {
    $("overlay-legend").textContent = "measuring every head on repeated random tokens " +
      "(once per model: a few seconds)…";
    answers[model] = api(`/api/model/taxonomy?model=${encodeURIComponent(model)}`);
  }
  let t;
  try {
    t = await answers[model];
  } catch (e) {
    delete answers[model];
    $("overlay-legend").textContent = `the server cannot score the heads: ${e.message}`;
    return;
  }
  if ($("overlay-kind").value !== kind || box.querySelector("button.thumb") !== thumbs[0]) {
    return repaint();  // the choice or the grid changed while waiting
  }
  const scores = t.scores[kind];
  for (const b of thumbs) {
    const s = scores[Number(b.dataset.layer)][Number(b.dataset.head)];
    b.dataset.score = String(s);
    const badge = b.querySelector(".badge") || b.appendChild(h("span", { class: "badge" }));
    badge.textContent = fmt(s, 2).replace(/^0\./, ".");
    badge.classList.toggle("high", s >= 0.3);
    b.title = `layer ${b.dataset.layer}, head ${b.dataset.head} · ${kind} ${fmt(s, 3)}`;
  }
  const meaning = t.kinds.find((k) => k.name === kind).meaning;
  $("overlay-legend").textContent = `${kind}: ${meaning}, a mean weight in [0, 1] over ` +
    `${t.sequences} random sequences of ${t.half} tokens repeated; badges of 0.3 and more ` +
    "are dark.";
}
