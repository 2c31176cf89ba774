// The real-model mode's "what if" panel: one edit of the selected head (its z set to 0, its
// weights made uniform, its own τ, one key hidden from it), run by the server with and without
// the edit (POST /api/model/patch, qkv.hf.compare). Shown: the next token's top-k before and
// after as bars, and the server's sentence with the KL. Nothing is computed here.
import { api } from "./api.js";
import { $, disable, fmt, h } from "./dom.js";

const EDITS = {
  ablate: "zero the head's output z",
  pin: "make its weights uniform",
  tau: "give it its own temperature τ",
  knockout: "hide one key from it",
};
let abilities = {};   // model name -> GET /api/model/abilities row
let current = null;   // {model, text, layer, head, tokens} of the head on the page
let asked = 0;

export async function install(after) {
  const panel = h("section", { id: "panel-whatif", class: "panel wide", hidden: true },
    h("h2", {}, "what if? ", h("span", { id: "whatif-head" })),
    h("p", { class: "hint" }, "Edit the selected head while the model runs and compare its ",
      "next-token prediction after the text, with and without the edit (qkv.hf.compare)."),
    h("form", { id: "whatif-form", autocomplete: "off",
                onsubmit: (e) => { e.preventDefault(); run(); } },
      h("label", {}, "edit ", h("select", { id: "whatif-kind", "aria-label": "edit",
                                              onchange: showInputs },
        ...Object.entries(EDITS).map(([k, text]) => new Option(text, k)))),
      h("label", { id: "whatif-tau-label" }, "τ ", h("input", {
        id: "whatif-tau", type: "number", min: "0.001", max: "1000", step: "any", value: "0.3",
        inputmode: "decimal", "aria-label": "the head's temperature τ" })),
      h("label", { id: "whatif-key-label" }, "key ", h("select", {
        id: "whatif-key", "aria-label": "the key to hide" })),
      h("button", { type: "submit", id: "whatif-run" }, "run")),
    h("p", { id: "whatif-why", class: "hint", "aria-live": "polite" }),
    h("p", { id: "whatif-summary", "aria-live": "polite" }),
    h("div", { id: "whatif-bars", class: "whatif-bars" }));
  after.after(panel);
  showInputs();
  try {
    for (const a of await api("/api/model/abilities")) abilities[a.name] = a;
  } catch (e) {
    $("whatif-why").textContent = `cannot ask the server what it can do: ${e.message}`;
  }
  if (current) update(current);
}

function showInputs() {
  const kind = $("whatif-kind").value;
  $("whatif-tau-label").hidden = kind !== "tau";
  $("whatif-key-label").hidden = kind !== "knockout";
}

// The head on the page changed (or its sentence): forget the old answer, offer its keys.
export function update(head) {
  const key = JSON.stringify(head);
  if (key !== JSON.stringify(current)) {
    $("whatif-summary").textContent = "";
    $("whatif-bars").replaceChildren();
    $("whatif-key").replaceChildren(...head.tokens.map((t, j) => new Option(`${j} · ${t}`, j)));
  }
  current = head;
  $("whatif-head").textContent = `· layer ${head.layer}, head ${head.head}`;
  const a = abilities[head.model];
  const why = a && !a.what_if ? a.what_if_why : "";
  disable($("whatif-run"), why);
  $("whatif-why").textContent = why;
}

function edit() {
  const kind = $("whatif-kind").value;
  if (kind === "ablate") return { ablate: "zero" };
  if (kind === "pin") return { pin: "uniform" };
  if (kind === "tau") return { tau: Number($("whatif-tau").value) };
  return { knockout: Number($("whatif-key").value) };
}

async function run() {
  const n = ++asked;
  const head = current;
  $("whatif-summary").textContent = `running ${head.model} twice, without and with the edit…`;
  disable($("whatif-run"), "running…");
  try {
    const data = await api("/api/model/patch", { model: head.model, text: head.text,
      layer: head.layer, head: head.head, edit: edit(), top_k: 5 });
    if (n !== asked) return;
    $("whatif-summary").textContent = `${data.edit}: ${data.summary}.`;
    $("whatif-bars").replaceChildren(bars("before", data.before), bars("after", data.after));
    document.body.dataset.whatifRuns = String(n);
  } catch (e) {
    if (n === asked) $("whatif-summary").textContent = `the server refused this: ${e.message}`;
  } finally {
    if (n === asked) disable($("whatif-run"), "");
  }
}

function bars(title, top) {
  return h("div", { class: "whatif-column", dataset: { when: title } },
    h("h3", {}, title),
    ...top.map(({ token, p }) => {
      const fill = h("span", { class: "fill" });
      fill.style.width = `${(100 * p).toFixed(2)}%`;  // (CSSOM: the page's CSP allows no style="")
      return h("div", { class: "bar", dataset: { p, token } },
        h("span", { class: "label" }, JSON.stringify(token)),
        h("span", { class: "track" }, fill),
        h("span", { class: "value" }, fmt(p, 3)));
    }));
}
