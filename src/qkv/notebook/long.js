// A long text's view (past views/long_text.py's PANEL_TOKENS tokens): what fits a screen
// instead of every number of a head. The selected head's weights as a picture the kernel drew
// (views/picture.py), the selected query's heaviest keys in numbers, and the tokens to pick
// a query from, in a panel that opens when asked for.
import { $ as byId, fmt, h } from "../web/static/dom.js";

export const LONG_OPEN = ["panel-view"];  // the panels open at first

export function buildLong(info) {
  return h("main", { class: "long" },
    h("section", { id: "panel-view", class: "panel wide" },
      h("h2", {}, h("code", {}, "weights"), " of the selected head ", h("span", { id: "view-title" })),
      h("p", { class: "hint" }, `${info.tokens.length} queries × ${info.tokens.length} keys, ` +
        "max-pooled to fit (one sharp weight stays visible); darker = more weight. Below the " +
        "heatmap: the selected query's row, marked at the left."),
      h("div", { id: "view" })),
    h("section", { id: "panel-row", class: "panel wide" },
      h("h2", {}, "the selected query's heaviest keys"),
      h("dl", { id: "row-stats", class: "stats" }),
      h("ol", { id: "top-keys", class: "top-keys" })),
    h("section", { id: "panel-tokens", class: "panel wide" },
      h("h2", {}, "tokens · click one to make it the query"),
      h("div", { id: "tokens", class: "tokens scroll", role: "toolbar", "aria-label": "tokens" })));
}

// The query control for the header: an index, with the token it names beside it.
export function queryControl(info) {
  return h("label", {}, "query ",
    h("input", { type: "number", id: "query", min: 0, max: info.tokens.length - 1, step: 1,
                 "aria-label": "query token index" }),
    " ", h("span", { id: "query-token", class: "hint" }));
}

// Fills the token buttons (once: thousands of them, so only when their panel opens).
export function fillTokens(root, info, onSelect) {
  const box = byId("tokens", root);
  if (box.childElementCount) return;
  box.append(...info.tokens.map((tok, j) => h("button", {
    type: "button", class: "token", dataset: { index: j }, onclick: () => onSelect(j) }, tok)));
}

// Paints the brief answer ({settings, selected}) into the long view.
export function drawLong(root, result, info, onSelect) {
  const $ = (id) => byId(id, root);
  const st = result.settings, sel = result.selected;
  $("view-title").textContent = [info.layers ? `· layer ${st.layer}` : "",
    info.n_heads ? `head ${st.head}` : "", `τ = ${fmt(st.temperature, 2)}`].filter(Boolean).join(", ");
  if ($("query")) {
    $("query").value = String(st.select);
    $("query-token").textContent = info.tokens[st.select];
  }
  const stat = (term, value) => [h("dt", {}, term), h("dd", {}, value)];
  $("row-stats").replaceChildren(
    ...stat("query", `${sel.token} (position ${sel.index})`),
    ...stat("keys it may see", String(sel.visible_keys)),
    ...stat("entropy", `${fmt(sel.entropy, 3)} nats` +
      (sel.effective_tokens == null ? "" : ` ≈ ${fmt(sel.effective_tokens, 1)} keys' worth`)),
    ...stat("Σ weights", fmt(sel.weights_sum, 4)));
  $("top-keys").replaceChildren(...sel.top_keys.map((k) => h("li", {},
    h("button", { type: "button", class: "token", dataset: { index: k.position },
                  title: "make this key the query", onclick: () => onSelect(k.position) }, k.token),
    " ", h("span", { class: "weight", dataset: { weight: k.weight } }, fmt(k.weight, 4)))));
  for (const b of $("tokens").children) {
    const on = Number(b.dataset.index) === st.select;
    b.classList.toggle("selected", on);
    b.setAttribute("aria-pressed", String(on));
  }
}
