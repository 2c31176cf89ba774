"""What a view shows of a long text instead of every number: the selected query's row in
numbers (entropy, visible keys, its heaviest keys by name), read one row at a time, never an
L × S array. Past ``PANEL_TOKENS`` tokens the notebook widget and the export show this, the
pooled heatmap and the selected row, not the panels that print a whole head."""

from __future__ import annotations

import math

import numpy as np

from qkv.steps import entropy

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
