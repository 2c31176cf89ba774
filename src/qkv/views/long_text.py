"""What a view shows of a long text instead of every number: the selected query's row in
numbers (entropy, visible keys, its heaviest keys by name), read one row at a time, never an
L × S array. Past ``PANEL_TOKENS`` tokens the notebook widget and the export show this, the
pooled heatmap and the selected row, not the panels that print a whole head."""

from __future__ import annotations

import math

import numpy as np

from qkv import checks
from qkv.lazy import LazyTrace
from qkv.steps import entropy
from qkv.tiles import Source

PANEL_TOKENS = 32  # the panels print every number of a head: L × S of each step
TOP_KEYS = 10  # keys named for the selected query


def selected(trace, i: int, head: int | None, names: list[str], *, top: int = TOP_KEYS) -> dict:
    """Query i's row of ``head``: the sum of its weights, entropy (nats) and its exponent,
    the keys it may see, its ``top`` heaviest keys by position, label and weight."""
    w = np.asarray(trace.rows(i, head=head), dtype=np.float64)  # (S,)
    masked = np.asarray(trace.rows(i, head=head, step="masked"))  # (S,): −inf where hidden
    ent = float(entropy(w))
    best = trace.top_keys(top, head=head, rows=[i])
    return {
        "index": i,
        "token": names[i],
        "weights_sum": float(w.sum()),
        "entropy": ent,
        "effective_tokens": math.exp(ent) if math.isfinite(ent) else None,
        "visible_keys": int(np.count_nonzero(masked != -np.inf)),
        "top_keys": [
            {"position": int(j), "token": names[int(j)], "weight": float(v)}
            for j, v in zip(best.keys[0], best.weights[0], strict=True)
        ],
    }


def retempered(trace, temperature: float) -> LazyTrace:
    """A layer's trace at another τ, lazily: the same q, k, v, mask rule and settings, nothing
    computed until a reader asks (an eager trace is rerun from its q, k, v and mask)."""
    if isinstance(trace, LazyTrace):
        s = trace.source
        src = Source(
            s.q, s.k, s.v, s.rule, scale=s.scale, temperature=temperature, softcap=s.softcap,
            bias=s.bias, sinks=s.sinks, W_O=s.W_O, b_O=s.b_O,
        )  # fmt: skip
        return LazyTrace(src, extra=trace.extra, tokens=trace.tokens, key_tokens=trace.key_tokens)
    st = trace.settings
    p = checks.problem(
        trace["q"], trace["k"], trace["v"], mask=st.get("mask"), causal=st.get("causal") or False,
        scale=st["scale"], temperature=temperature,
    )  # fmt: skip
    return LazyTrace(Source.of(p), tokens=trace.tokens, key_tokens=trace.key_tokens)
