// The real-model mode's "why this token?" panel: asks the server which heads wrote the model's
// next token after the text (POST /api/model/attribute: qkv.hf.attribute, and with a corrupted
// prompt qkv.hf.patching) and draws the answer with why.js. A click on a head there also
// selects it in the page's grid and panels, so its whole pattern shows below.
import { api } from "./api.js";
import { $, disable, fmt, h } from "./dom.js";
import { drawWhy } from "./why.js";

let abilities = {};   // model name -> GET /api/model/abilities row
let current = null;   // {model, text} of the sentence on the page
let pick = null;      // (layer, head) => the page selects that head
let asked = 0;

export function install(after, onPick) {
  pick = onPick;
  const panel = h("section", { id: "panel-why", class: "panel wide", hidden: true },
    h("h2", {}, "why this token? ", h("span", { id: "why-head" })),
    h("p", { class: "hint" }, "Which heads wrote the model's next token after the text: each ",
      "head's share of the target's logit (minus the baseline's), read through the final norm ",
      "(qkv.hf.attribute). With a corrupted prompt of as many tokens, the grid can show how much ",
      "of the answer each head's clean output restores (qkv.hf.patching). Click a head for its ",
      "share split by the key it read."),
    h("form", { id: "why-form", autocomplete: "off",
                onsubmit: (e) => { e.preventDefault(); run(); } },
      h("label", {}, "target ", h("input", { id: "why-target", class: "token", type: "text",
        maxlength: 64, spellcheck: "false", placeholder: "likeliest",
        "aria-label": "target token (default: the likeliest next token; ␣ = a space)" })),
      h("label", {}, "baseline ", h("input", { id: "why-baseline", class: "token", type: "text",
        maxlength: 64, spellcheck: "false", placeholder: "none",
        "aria-label": "baseline token (optional)" })),
      h("label", { class: "grow" }, "corrupted ", h("input", { id: "why-corrupted", type: "text",
        spellcheck: "false", placeholder: "optional: as many tokens, another answer",
        "aria-label": "corrupted prompt (optional)" })),
      h("button", { type: "submit", id: "why-run" }, "explain")),
    h("p", { id: "why-status", class: "hint", "aria-live": "polite" }),
    h("div", { id: "why-box" }));
  after.after(panel);
  api("/api/model/abilities").then((rows) => {
    for (const a of rows) abilities[a.name] = a;
    if (current) update(current);
  }).catch((e) => {
    $("why-status").textContent = `cannot ask the server what it can do: ${e.message}`;
  });
}

// The sentence on the page changed (or its model): forget the old answer.
export function update(sentence) {
  const key = JSON.stringify(sentence);
  if (key !== JSON.stringify(current)) {
    asked += 1;  // an answer still on its way is for the old sentence
    $("why-box").replaceChildren();
    $("why-head").textContent = "";
    $("why-status").textContent = "";
  }
  current = sentence;
  const a = abilities[sentence.model];
  const why = a && !a.attribute ? a.attribute_why : "";
  disable($("why-run"), why);
  if (why) $("why-status").textContent = why;
}

async function run() {
  const n = ++asked;
  const body = { model: current.model, text: current.text };
  for (const k of ["target", "baseline", "corrupted"]) {
    const v = $(`why-${k}`).value;
    if (v.trim()) body[k] = k === "corrupted" ? v.trim() : v;
  }
  $("why-status").textContent = `running ${body.model}` +
    (body.corrupted ? " on both prompts, then once per head patched…" : "…");
  disable($("why-run"), "running…");
  try {
    const data = await api("/api/model/attribute", body);
    if (n !== asked) return;
    const p = data.prediction;
    $("why-status").textContent = `${data.model}'s likeliest next token: ${p.label} ` +
      `(p = ${fmt(p.p, 3)}).`;
    $("why-head").textContent = `· ${data.panel.quantity}`;
    drawWhy($("why-box"), data.panel, { onPick: pick });
    document.body.dataset.whyRuns = String(n);
  } catch (e) {
    if (n === asked) $("why-status").textContent = `the server refused this: ${e.message}`;
  } finally {
    if (n === asked) disable($("why-run"), "");
  }
}
