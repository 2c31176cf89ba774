"""What the widget publishes, sized on the wire (``wire.py``), at the largest text whose panels
print every number of a head (``long_text.PANEL_TOKENS`` tokens of SmolLM2): the head's trace
travels when τ, the head or the layer change it, never for another query, and no change costs
more than 256 KB."""

from __future__ import annotations

import pytest

import qkv
from qkv.bench.trace import text_of
from qkv.views.long_text import PANEL_TOKENS

pytest.importorskip("anywidget", reason="the notebook extra is not installed")

import wire  # noqa: E402


def test_each_change_at_the_panels_largest_text_stays_small(smollm2, monkeypatch):
    run = smollm2.trace(text_of(smollm2, PANEL_TOKENS))
    assert len(run.tokens) == PANEL_TOKENS
    wire.recording(monkeypatch)
    w = qkv.show(run)
    assert not w.info["long"] and w.trace["steps"]["weights"]["dtype"] == "float32"
    assert wire.sent_since(w, 0) <= 2_000_000
    sizes = {}
    for name, value in [("temperature", 0.5), ("layer", 3), ("head", 2), ("select", 5)]:
        start = len(w.comm.sent)
        setattr(w, name, value)
        sizes[name] = wire.sent_since(w, start)
        sent = {k for _, d, _ in w.comm.sent[start:] for k in (d.get("state") or {})}
        assert ("trace" in sent) == (name != "select"), (name, sent)
    assert max(sizes.values()) <= 256_000, sizes
    assert sizes["select"] < sizes["temperature"] / 3, sizes
