"""What the page shows of one trace, built once for scenes and real models alike: the selected
query's row (weights, entropy, visible keys, each key's contribution) and the walkthrough."""

from __future__ import annotations

import math

import numpy as np

from qkv.explain.walkthrough import walkthrough
from qkv.steps import entropy
from qkv.trace import Trace


def selected(trace: Trace, i: int, head: int | None = None) -> dict:
    """Query i's row of the weights (of head ``head`` when the trace has a head axis)."""
    weights = trace["weights"]  # (..., [H,] L, S)
    mask = trace.settings.get("mask")
    if head is not None:
        weights = weights[head]
    w = weights[i]  # (S,)
    ent = float(entropy(w))
    if mask is None:
        visible = w.shape[0]
    else:
        full = np.broadcast_to(mask, trace["weights"].shape)
        visible = int((full if head is None else full[head])[i].sum())
    return {"index": i, "head": head, "weights_sum": float(w.sum()), "entropy": ent,
            "effective_tokens": math.exp(ent), "visible_keys": visible,
            "contributions": trace.contributions(i, head=head).tolist()}


def walkthrough_sections(trace: Trace, i: int, head: int | None = None) -> list[dict]:
    """The step-by-step prose for query i, as the API sends it."""
    return [{"title": s.title, "lines": list(s.lines)} for s in walkthrough(trace, i, head=head)]
