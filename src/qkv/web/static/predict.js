// Predict, then reveal: with the "predict" toggle on, the selected query's weights stay hidden
// until the learner has picked the key they expect to win and estimated its weight. The numbers
// come from the engine's answer the page already holds (POST /api/trace); this module only
// compares them with the guess.
import { $, deep, disable, fmt, h } from "./dom.js";

const VEILED = ["panel-diagram", "panel-pipeline", "panel-weights", "panel-z", "panel-heads",
                "panel-formula", "panel-walkthrough"];
const PICK_FIRST = "pick the key you expect to win first";
const REVEALED = "revealed: pick another token (or change τ, scale or causal) to predict again";
const TIE = 1e-9;  // keys within this of the largest weight all count as winners

let on = false;
let question = null;  // the current question: {id, tokens, i, weights, visible}
let revealedId = null;
let guess = { key: null, weight: 0.5 };
const tally = { answered: 0, right: 0, gaps: 0 };

function stylesheet() {
  if (document.querySelector('link[href="/static/practice.css"]')) return;
  document.head.append(h("link", { rel: "stylesheet", href: "/static/practice.css" }));
}

// Adds the "predict" toggle to the controls and the (hidden) panel before the pipeline panel.
export function install() {
  stylesheet();
  const toggle = h("label", { id: "predict-label", title: "guess the weights before they are shown" },
    h("input", { type: "checkbox", id: "predict", onchange: (e) => setOn(e.target.checked) }),
    " predict");
  $("controls").insertBefore(toggle, $("reset"));
  const slider = h("input", { type: "range", id: "predict-weight", min: "0", max: "1",
    step: "0.01", value: "0.5", "aria-label": "estimated weight of the chosen key",
    oninput: (e) => { guess.weight = Number(e.target.value); showWeight(); } });
  const panel = h("section", { id: "panel-predict", class: "panel", hidden: true },
    h("h2", {}, "predict · where will ", h("code", { id: "predict-query" }), " look?",
      h("span", { id: "predict-head" })),
    h("p", { class: "hint", id: "predict-ask" }),
    h("div", { id: "predict-keys", class: "tokens", role: "radiogroup",
               "aria-label": "the key you expect to win" }),
    h("div", { class: "predict-row" },
      h("label", { for: "predict-weight" }, "its weight"), slider,
      h("output", { id: "predict-weight-value", for: "predict-weight" }, "0.50"),
      h("button", { type: "button", id: "predict-reveal", disabled: true, onclick: reveal,
                    title: PICK_FIRST, "aria-description": PICK_FIRST },
        "reveal")),
    h("div", { id: "predict-feedback", class: "feedback", role: "status", hidden: true }),
    h("p", { id: "predict-tally", class: "hint" }));
  $("panel-pipeline").before(panel);
  document.addEventListener("qkv:rendered", (e) => update(e.detail.result));
}

function showWeight() {
  $("predict-weight-value").textContent = guess.weight.toFixed(2);
}

// The selected query's weights (of the selected head) and which keys it may see.
function questionOf(result) {
  const t = result.trace, s = result.settings;
  const all = deep(t.steps.weights.data);
  const H = t.settings.n_heads;
  const weights = (H ? all[s.head] : all)[s.select];
  const maskRow = t.mask ? t.mask.data[s.select] : null;
  const visible = weights.map((_, j) => (maskRow ? Boolean(maskRow[j]) : true));
  const id = JSON.stringify([s.preset, s.select, s.head, weights]);
  return { id, tokens: result.scene.tokens, i: s.select, weights, visible, head: H ? s.head : null };
}

function update(result) {
  const q = questionOf(result);
  const fresh = !question || q.id !== question.id;
  question = q;
  if (!on) return;
  if (fresh) ask();
  else veil(revealedId !== question.id);
  markGuess();
}

function setOn(value) {
  on = value;
  $("panel-predict").hidden = !on;
  document.body.classList.toggle("predict-mode", on);
  if (on && question) ask();
  if (!on) { veil(false); markGuess(); }
}

function ask() {
  revealedId = null;
  guess = { key: null, weight: 0.5 };
  const { tokens, i, visible } = question;
  $("predict-query").textContent = tokens[i];
  $("predict-head").textContent = question.head === null ? "" : ` (head ${question.head})`;
  $("predict-ask").textContent = `Before the weights of "${tokens[i]}" are shown: which key ` +
    "will it give the most weight, and how much of the total 1? Its q and every k are in the " +
    "q · k · v panel; the larger q·k, the larger the weight.";
  $("predict-keys").replaceChildren(...tokens.map((tok, j) => h("button", {
    type: "button", class: visible[j] ? "token" : "token masked", role: "radio",
    "aria-checked": "false",
    dataset: { index: j }, disabled: !visible[j], title: visible[j] ? null : "masked: weight 0",
    "aria-description": visible[j] ? null : "masked: weight 0",
    onclick: () => pick(j) }, tok)));
  $("predict-weight").value = "0.5";
  disable($("predict-weight"), "");
  showWeight();
  disable($("predict-reveal"), PICK_FIRST);
  $("predict-feedback").hidden = true;
  $("panel-predict").dataset.state = "guess";
  veil(true);
}

function pick(j) {
  if (revealedId === question.id) return;
  guess.key = j;
  for (const b of $("predict-keys").children) {
    b.setAttribute("aria-checked", Number(b.dataset.index) === j ? "true" : "false");
  }
  disable($("predict-reveal"), "");
}

function veil(hidden) {
  for (const id of VEILED) $(id).classList.toggle("veiled", hidden);
}

function reveal() {
  if (guess.key === null || revealedId === question.id) return;
  revealedId = question.id;
  const { tokens, weights } = question;
  const best = Math.max(...weights);
  const winners = weights.map((w, j) => j).filter((j) => weights[j] >= best - TIE);
  const right = winners.includes(guess.key);
  const truth = weights[guess.key];
  const gap = Math.abs(guess.weight - truth);
  tally.answered += 1;
  tally.right += right ? 1 : 0;
  tally.gaps += gap;
  const mine = tokens[guess.key];
  const names = winners.map((j) => `"${tokens[j]}"`).join(" and ");
  const verdict = right
    ? `✓ right: "${mine}" gets the most weight, ${fmt(truth, 3)}.`
    : `✗ the most weight goes to ${names} (${fmt(best, 3)}); "${mine}" gets ${fmt(truth, 3)}.`;
  const size = gap < 0.05 ? "close" : gap < 0.15 ? "near" : "far";
  const box = $("predict-feedback");
  box.replaceChildren(
    h("p", { class: right ? "good" : "bad", id: "predict-verdict" }, verdict),
    h("p", { id: "predict-gap" }, `your estimate ${fmt(guess.weight, 2)} for "${mine}" vs the ` +
      `engine's ${fmt(truth, 3)}: off by ${fmt(gap, 3)} (${size}).`),
    h("p", { class: "hint" }, "Pick another token (or change τ, scale or causal) to predict again."));
  Object.assign(box.dataset, { correct: String(right), gap: String(gap),
                               winner: String(winners[0]), truth: String(truth) });
  box.hidden = false;
  disable($("predict-reveal"), REVEALED);
  disable($("predict-weight"), REVEALED);
  for (const b of $("predict-keys").children) {
    disable(b, REVEALED);
    b.classList.toggle("winner", winners.includes(Number(b.dataset.index)));
  }
  $("predict-tally").textContent = `this session: ${tally.right} of ${tally.answered} winners ` +
    `right · mean weight gap ${fmt(tally.gaps / tally.answered, 3)}`;
  $("panel-predict").dataset.state = "revealed";
  veil(false);
  markGuess();
}

// After a reveal, a marker on the guessed key's bar shows the estimate beside the true weight.
function markGuess() {
  for (const m of document.querySelectorAll("#bars .guess-mark")) m.remove();
  if (!on || !question || revealedId !== question.id || guess.key === null) return;
  const bar = document.querySelector(`#bars .bar[data-key="${guess.key}"] .track`);
  if (!bar) return;
  const mark = h("span", { class: "guess-mark", title: `your estimate ${fmt(guess.weight, 2)}` });
  mark.style.left = `${(100 * guess.weight).toFixed(2)}%`;
  bar.append(mark);
}
