"""What the widget sends, measured on the wire while its JavaScript runs in Chromium joined to
the Python widget (``widget_bridge``): for the bundled SmolLM2 at 2,048 tokens the first state
is at most 2 MB and each change (τ, layer, head, query) at most 256 KB — the sum of every
message's JSON and binary buffers, answers to the view's own requests included."""

from __future__ import annotations

import pytest

import qkv
from qkv.bench.trace import text_of

pytest.importorskip("anywidget", reason="the notebook extra is not installed")

from widget_bridge import open_bridged, settle, wire  # noqa: E402

FIRST_STATE = 2_000_000
PER_CHANGE = 256_000


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
        print(f"first state {first:,} bytes; per change", {k: f"{v:,}" for k, v in sizes.items()})
        assert max(sizes.values()) <= PER_CHANGE, sizes
        assert not errors
    finally:
        page.context.close()
