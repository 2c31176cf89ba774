"""What every surface shows of one trace and one selected query, computed once here for the
server, the notebook widget and the exported HTML alike: the selected query's row (weights,
entropy, visible keys, each key's contribution), the walkthrough, one head of a real model's
layer, and ``answer``, the three of them together as the page draws them."""

from __future__ import annotations

import math

import numpy as np

from qkv.explain.walkthrough import walkthrough
from qkv.steps import HEAD_STEPS, entropy
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
    row = {
        "index": i,
        "head": head,
        "weights_sum": float(w.sum()),
        "entropy": ent,
        "effective_tokens": math.exp(ent),
        "visible_keys": visible,
        "contributions": trace.contributions(i, head=head).tolist(),
    }
    if "sink" in trace:  # the weight the sink takes: with the keys' weights it sums to 1
        sink = trace["sink"] if head is None else trace["sink"][head]  # (L, 1)
        row["sink"] = float(sink[i, 0])
        row["sum_with_sink"] = float(w.sum() + sink[i, 0])
    return row


def walkthrough_sections(trace: Trace, i: int, head: int | None = None) -> list[dict]:
    """The step-by-step prose for query i, as the API sends it."""
    return [{"title": s.title, "lines": list(s.lines)} for s in walkthrough(trace, i, head=head)]


def answer(
    trace: Trace,
    i: int,
    head: int | None = None,
    *,
    walk: Trace | None = None,
    trace_dict: dict | None = None,
) -> dict:
    """What the page draws for query i: the trace shown (``Trace.to_dict``, or ``trace_dict``
    when the caller keeps it), the selected row and the walkthrough (read from ``walk``, default
    the trace shown; a model's view walks its whole layer while it shows one head). ``head``
    picks from a head axis of the trace shown, and of ``walk``; the selected row names it even
    when the trace shown is that one head alone."""
    walk = trace if walk is None else walk
    row_head = head if trace.settings.get("n_heads") else None
    walk_head = head if walk.settings.get("n_heads") else None
    return {
        "trace": trace.to_dict() if trace_dict is None else trace_dict,
        "selected": {**selected(trace, i, row_head), "head": head},
        "walkthrough": walkthrough_sections(walk, i, walk_head),
    }


def scene_summary(scene) -> dict:
    """A built-in scene's name, title, lesson, tokens and sizes (``SceneInfo``'s fields)."""
    return {
        "name": scene.name,
        "title": scene.title,
        "lesson": scene.lesson,
        "tokens": list(scene.tokens),
        "select": scene.select,
        "scaled": scene.scaled,
        "n_heads": scene.n_heads,
        "d_model": int(scene.x.shape[1]),
    }


def one_head(trace: Trace, head: int) -> Trace:
    """Query head ``head`` of a layer trace as the page draws it: ``trace.head(head)`` (its K/V
    head chosen by group; computed for that head alone on a lazy trace) with only its own steps
    (``HEAD_STEPS``: no x, rope or head_out), held."""
    one = trace.head(head)
    return Trace(
        {name: one[name] for name in HEAD_STEPS if name in one},
        dict(one.settings),
        tokens=None if one.tokens is None else list(one.tokens),
    )
