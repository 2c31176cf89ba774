// The panels' markup, built into any root (the page's <main>, a widget's container): render.js
// finds its parts by id inside that root. Static text only; the numbers come from render.js.

const PANELS = `
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
    <p id="hover" class="hover" aria-live="polite">hover a cell to read its value</p>
  </section>

  <section id="panel-weights" class="panel">
    <h2><code>weights</code> of the selected query</h2>
    <div id="bars"></div>
    <dl id="weight-stats" class="stats"></dl>
  </section>

  <section id="panel-z" class="panel wide">
    <h2><code>z</code> = Σ<sub>j</sub> w<sub>j</sub>·v<sub>j</sub> · each key's contribution</h2>
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
