// The practice panel: the exercises of `qkv quiz`, fetched from GET /api/practice and checked
// on the server (POST /api/practice/check), which also sends the worked solution.
import { api, limits } from "./api.js";
import { $, disable, fmt, h } from "./dom.js";

const LETTERS = "abcdefghij";

let current = null;  // the exercise shown: {kind, seed, prompt, answer_type, choices, ...}
let answered = false;
const score = { right: 0, done: 0 };

// Adds the "practice" toggle to the controls and the (hidden) panel to the page.
export function install() {
  if (!document.querySelector('link[href="/static/practice.css"]')) {
    document.head.append(h("link", { rel: "stylesheet", href: "/static/practice.css" }));
  }
  const toggle = h("label", { id: "practice-label", title: "exercises with fresh numbers" },
    h("input", { type: "checkbox", id: "practice", onchange: (e) => setOn(e.target.checked) }),
    " practice");
  $("controls").insertBefore(toggle, $("reset"));
  const panel = h("section", { id: "panel-practice", class: "panel wide", hidden: true },
    h("h2", {}, "practice · exercises with fresh numbers, checked by the engine"),
    h("div", { class: "practice-bar" },
      h("label", {}, "topic ", h("select", { id: "practice-topic", "aria-label": "topic",
        onchange: next }, new Option("all", "all"))),
      h("button", { type: "button", id: "practice-new", onclick: next }, "new exercise"),
      h("span", { id: "practice-score", class: "hint" })),
    h("p", { id: "practice-kind", class: "hint" }),
    h("pre", { id: "practice-prompt", class: "prompt" }),
    h("div", { id: "practice-choices", class: "choices" }),
    h("form", { id: "practice-form", class: "practice-row", onsubmit: submit },
      h("input", { id: "practice-answer", autocomplete: "off", "aria-label": "your answer" }),
      h("button", { type: "submit", id: "practice-check" }, "check"),
      h("button", { type: "button", id: "practice-hint", onclick: hint }, "hint")),
    h("p", { id: "practice-hint-text", class: "hint", hidden: true }),
    h("p", { id: "practice-error", class: "bad", role: "alert", hidden: true }),
    h("div", { id: "practice-result", class: "feedback", role: "status", hidden: true }));
  document.querySelector("main").prepend(panel);
}

let topicsAsked = false;

// The topics (GET /api/practice/topics) and the answer's length bound, asked on first use.
async function loadTopics() {
  if (topicsAsked) return;
  topicsAsked = true;
  const [topics, bounds] = await Promise.all([api("/api/practice/topics"), limits()]);
  $("practice-topic").append(...Object.keys(topics).filter((t) => t !== "all")
    .map((t) => new Option(t, t)));
  $("practice-answer").maxLength = bounds.max_answer_chars;
}

async function setOn(value) {
  $("panel-practice").hidden = !value;
  if (!value) return;
  try {
    await loadTopics();
  } catch (e) {
    message("practice-error", `cannot list the topics: ${e.message}`);
  }
  if (!current) next();
}

function message(id, text) {
  $(id).textContent = text || "";
  $(id).hidden = !text;
}

async function next() {
  const topic = $("practice-topic").value;
  try {
    current = await api(`/api/practice?topic=${encodeURIComponent(topic)}`);
  } catch (e) {
    message("practice-error", `cannot fetch an exercise: ${e.message}`);
    return;
  }
  answered = false;
  $("practice-kind").textContent = `${current.kind} · seed ${current.seed}`;
  $("practice-prompt").textContent = current.prompt;
  const clickable = current.answer_type === "choice";
  $("practice-choices").replaceChildren(...current.choices.map((c, j) => h(
    clickable ? "button" : "div",
    { class: "choice", type: clickable ? "button" : null, dataset: { letter: LETTERS[j] },
      onclick: clickable ? () => { $("practice-answer").value = LETTERS[j]; check(); } : null },
    h("b", {}, `${LETTERS[j]})`), " ", c)));
  const input = $("practice-answer");
  input.value = "";
  input.placeholder = current.answer_format;
  disable(input, "");
  disable($("practice-check"), "");
  message("practice-hint-text", "");
  message("practice-error", "");
  $("practice-result").hidden = true;
  $("panel-practice").dataset.state = "asking";
  $("panel-practice").dataset.kind = current.kind;
  input.focus({ preventScroll: true });
}

function hint() {
  if (current) message("practice-hint-text", `hint: ${current.hint}`);
}

function submit(e) {
  e.preventDefault();
  check();
}

async function check() {
  if (!current || answered) return;
  let v;
  try {
    v = await api("/api/practice/check", { kind: current.kind, seed: current.seed,
                                           answer: $("practice-answer").value });
  } catch (err) {
    message("practice-error", `the server refused the answer: ${err.message}`);
    return;
  }
  if (!v.valid) {
    message("practice-error", `not an answer: ${v.message}. Try again.`);
    return;
  }
  message("practice-error", "");
  answered = true;
  score.done += 1;
  score.right += v.correct ? 1 : 0;
  const gap = v.gap ? ` (off by ${fmt(v.gap, 3)})` : "";
  const verdict = v.correct ? `✓ right: ${v.expected}${gap}`
                            : `✗ not quite: you said ${v.given}, the answer is ${v.expected}${gap}`;
  const box = $("practice-result");
  box.replaceChildren(h("p", { class: v.correct ? "good" : "bad", id: "practice-verdict" }, verdict),
    h("h3", {}, "worked solution"), h("pre", {}, v.solution.join("\n")));
  box.dataset.correct = String(v.correct);
  box.hidden = false;
  const done = "answered: press “new exercise” for another";
  disable($("practice-answer"), done);
  disable($("practice-check"), done);
  $("panel-practice").dataset.state = "answered";
  $("practice-score").textContent = `score ${score.right} / ${score.done}`;
}
