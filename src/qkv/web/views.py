"""What the page shows of one trace, built once for the server, the notebook widget and exported
HTML alike: the selected query's row (weights, entropy, visible keys, each key's contribution),
the walkthrough, one head of a real model's layer, and the layers × heads grid of weights.
No fastapi here: the notebook imports this module without the web extra."""

from __future__ import annotations

import base64
import math

import numpy as np

from qkv.explain.walkthrough import walkthrough
from qkv.steps import entropy, kv_head
from qkv.trace import Trace

GRID_ENCODING = "uint8/255 base64"


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
    """One head of a layer trace as a trace without a head axis (K/V head chosen by group)."""
    s = trace.settings
    kv = kv_head(head, s["n_heads"], s.get("n_kv_heads"))
    kept = {
        name: trace[name][kv] if name in ("k", "v") else trace[name][head]
        for name in (
            "q",
            "k",
            "v",
            "scores",
            "scaled",
            "tempered",
            "capped",
            "biased",
            "masked",
            "weights",
            "sink",
            "z",
        )
        if name in trace
    }
    mask = s.get("mask")
    if mask is not None:
        mask = np.ascontiguousarray(np.broadcast_to(mask, trace["weights"].shape)[head])
    settings = {k: v for k, v in s.items() if k not in ("mask", "n_heads", "n_kv_heads")}
    if len(s.get("sinks") or ()) > 1:
        settings["sinks"] = [s["sinks"][head]]  # the head's own sink logit
    return Trace(
        kept,
        {**settings, "mask": mask, "n_heads": None, "n_kv_heads": None},
        tokens=list(trace.tokens),
    )


def grid(weights: np.ndarray) -> dict:
    """(n_layers, n_heads, L, L) weights -> one byte each (weight ≈ byte / 255), base64."""
    data = np.clip(np.rint(weights * 255), 0, 255).astype(np.uint8)
    return {
        "shape": list(data.shape),
        "encoding": GRID_ENCODING,
        "data": base64.b64encode(data.tobytes()).decode(),
    }
