"""What the widget sends, measured on the wire while its JavaScript runs in Chromium joined to
the Python widget (``widget_bridge``): for the bundled SmolLM2 at 2,048 tokens the first state
is at most 2 MB and each change (τ, layer, head, query) at most 256 KB — the sum of every
message's JSON and binary buffers, answers to the view's own requests included."""

from __future__ import annotations

import numpy as np
import pytest

import qkv
from qkv.bench.trace import text_of
from qkv.steps import kv_head

pytest.importorskip("anywidget", reason="the notebook extra is not installed")

from widget_bridge import open_bridged, settle, wire  # noqa: E402

ZOOM = "document.querySelector('#a').shadowRoot.querySelector('#zoom-root').zoom"
FIRST_STATE = 2_000_000
PER_CHANGE = 256_000


def causal_weights(layer, head: int, tau: float) -> np.ndarray:
    """One head's weights from the layer's q and k (after RoPE), in float64 by hand."""
    s = layer.settings
    q = layer["q"][head].astype(np.float64)  # (L, d)
    k = layer["k"][kv_head(head, s["n_heads"], s["n_kv_heads"])].astype(np.float64)
    scores = q @ k.T * s["scale"] / tau  # (L, L)
    scores[np.triu_indices(len(q), 1)] = -np.inf
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.slow
def test_2048_tokens_first_state_and_each_change_stay_small(browser, smollm2, monkeypatch):
    text = text_of(smollm2, 2048)
    run = smollm2.trace(text)
    assert len(run.tokens) == 2048
    wire.recording(monkeypatch)
    w = qkv.show(run)
    w._repr_mimebundle_()  # displayed: what a notebook does with the cell's last expression
    page, bridge, errors = open_bridged(browser, w)
    try:
        settle(page)
        first = bridge.bytes_since(0)
        assert first <= FIRST_STATE, first
        sizes = {}
        for name, act in [
            ("τ", lambda: page.locator("#a #tau").fill("300")),
            ("layer", lambda: page.locator("#a #layer").select_option("7")),
            ("head", lambda: page.locator("#a #head").select_option("3")),
            ("query", lambda: page.locator("#a #query").fill("1000")),
        ]:
            start = bridge.sent
            act()
            if name == "query":
                page.locator("#a #query").dispatch_event("change")
            settle(page)
            sizes[name] = bridge.bytes_since(start)
            assert bridge.sent > start, f"the {name} change sent nothing"
        assert (w.layer, w.head, w.select) == (7, 3, 1000)
        assert w.temperature != 1.0
        # zoom to 40 × 40 cells around the query: exact numbers, the engine's
        start = bridge.sent
        page.evaluate(f"() => {ZOOM}.show(990, 1030, 960, 1000)")
        page.wait_for_function(f"() => {ZOOM}.state.win?.header.exact === true")
        settle(page)
        sizes["zoom"] = bridge.bytes_since(start)
        got = np.array(page.evaluate(f"() => Array.from({ZOOM}.state.win.data)"))
        shape = page.evaluate(f"() => {ZOOM}.state.win.header.shape")
        box = page.evaluate(f"() => ['r0', 'r1', 'c0', 'c1'].map(k => {ZOOM}.state.win.header[k])")
        r0, r1, c0, c1 = box
        assert r0 <= 990 and r1 >= 1030 and c0 <= 960 and c1 >= 1000
        ref = causal_weights(run.layer(7), 3, w.temperature)[r0:r1, c0:c1]
        np.testing.assert_allclose(got.reshape(shape), ref, rtol=2e-5, atol=1e-7)
        print(f"first state {first:,} bytes; per change", {k: f"{v:,}" for k, v in sizes.items()})
        assert max(sizes.values()) <= PER_CHANGE, sizes
        assert not errors
    finally:
        page.context.close()
