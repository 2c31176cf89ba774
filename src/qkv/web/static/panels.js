// The panels' markup, built into any root (the page's <main>, a widget's container): render.js
// finds its parts by id inside that root. Static text only; the numbers come from render.js.

const PANELS = `
  <details id="how-to" class="panel wide how-to">
    <summary>How to use</summary>
    <ol>
      <li><b>Click a token</b> (or tap it, or focus it and press ← →): it becomes the query, and
        every panel shows its row.</li>
      <li><b>Follow its path</b> in the diagram below: each box holds its real numbers; press one
        to jump to its panel.</li>
      <li><b>Move τ</b>, switch <b>scale</b> or <b>causal</b>, or edit any number of X or W, and
        watch the weights and z change; every number comes from the engine.</li>
      <li><b>Read a cell</b> of the heatmap by pointing at it, tapping it or focusing it; the
        legend gives the colour's value.</li>
      <li><b>predict</b> hides the weights until you guess them; <b>practice</b> asks fresh
        exercises; <b>real model</b> shows MiniLM or SmolLM2 on your sentence.</li>
    </ol>
  </details>
  <section id="panel-x" class="panel">
    <h2><code>x</code> · tokens and input vectors X</h2>
    <p class="hint">Click a token (or focus it and press Enter, ← →) to make it the query. Edit any
      number of X or W; the engine recomputes everything.</p>
    <div id="tokens" class="tokens" role="toolbar" aria-label="tokens"></div>
    <div id="x-editor" class="scroll"></div>
  </section>

  <section id="panel-w" class="panel">
    <h2><code>W_Q</code> · <code>W_K</code> · <code>W_V</code><span id="w-head"></span></h2>
    <div id="w-editors" class="editors"></div>
  </section>

  <section id="panel-diagram" class="panel wide">
    <h2>the selected token's path · <code>x</code> → <code>q</code>, <code>k</code>,
      <code>v</code> → <code>q·kᵀ</code> → ÷√d<sub>k</sub> → ÷τ → mask → softmax → Σ
      w<sub>j</sub>v<sub>j</sub> → <code>z</code></h2>
    <div id="diagram"></div>
  </section>

  <section id="panel-qkv" class="panel wide">
    <h2><code>q</code> · <code>k</code> · <code>v</code> = x·W<span id="qkv-head"></span></h2>
    <div id="qkv-tables" class="editors"></div>
  </section>

  <section id="panel-pipeline" class="panel">
    <h2><code>scores</code> → <code>scaled</code> → <code>tempered</code> → <code>masked</code> →
      <code>weights</code></h2>
    <div id="stages" class="stages" role="radiogroup" aria-label="pipeline stage"></div>
    <p id="stage-note" class="hint"></p>
    <div id="heatmap" class="scroll"></div>
    <div id="legend" class="legend" aria-label="colour scale"></div>
    <p id="hover" class="hover" aria-live="polite">point at, tap or focus a cell to read its value</p>
  </section>

  <section id="panel-weights" class="panel">
    <h2><code>weights</code> of the selected query</h2>
    <div id="bars"></div>
    <dl id="weight-stats" class="stats"></dl>
  </section>

  <section id="panel-z" class="panel wide">
    <h2><code>z</code> = Σ<sub>j</sub> w<sub>j</sub>·v<sub>j</sub> · each key's contribution</h2>
    <div id="mix" class="mix scroll"></div>
    <div id="contrib" class="scroll"></div>
  </section>

  <section id="panel-heads" class="panel wide" hidden>
    <h2><code>z</code> per head → <code>head_out</code> = z·W_O<sup>h</sup> → <code>out</code> =
      Σ<sub>h</sub> head_out + b_O</h2>
    <div id="heads" class="scroll"></div>
  </section>

  <section id="panel-formula" class="panel wide">
    <h2>formula with this scene's numbers</h2>
    <div id="formula" class="formula"></div>
  </section>

  <section id="panel-walkthrough" class="panel wide">
    <h2>walkthrough</h2>
    <div id="walkthrough" class="walkthrough"></div>
  </section>

  <section id="panel-notes" class="panel wide notes">
    <div>
      <h2>what to notice</h2>
      <p id="notice"></p>
      <ul>
        <li>Keys decide <em>where</em> the query looks; values decide <em>what</em> comes back.</li>
        <li>Lower τ sharpens the weights toward the best-matching key; higher τ spreads them.</li>
        <li>With causal on, a token cannot see the tokens after it: their weights are exactly 0.</li>
      </ul>
    </div>
    <div>
      <h2>parameters</h2>
      <ul>
        <li><b>τ</b> (temperature) divides the scaled scores before softmax; 1 is the standard.</li>
        <li><b>scale</b> divides scores by √d<sub>k</sub>, keeping softmax out of saturation as
          d<sub>k</sub> grows.</li>
        <li><b>causal</b> hides later keys; <b>bottom-right</b> treats the queries as the last L of S
          keys (decoding with a cache), <b>top-left</b> starts both at position 0.</li>
        <li id="sizes"></li>
      </ul>
    </div>
    <div>
      <h2>limitations</h2>
      <ul>
        <li>Toy sizes (up to <span id="limit-tokens"></span> tokens × <span id="limit-dims"></span> dimensions) with hand-chosen weights, not a trained
          model; X stands for embedding plus position.</li>
        <li>Self-attention only: L = S, so both causal alignments give the same triangle.</li>
        <li>The URL keeps the scene, token, τ, toggles and head; edited numbers are not in it.</li>
      </ul>
    </div>
  </section>`;

// Fill root (an element or shadow root) with the empty panels; returns root.
export function buildPanels(root) {
  root.innerHTML = PANELS;
  return root;
}
