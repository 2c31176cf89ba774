"""The "why this token" panel, computed once for the page, the notebook widget and the export:
from a direct logit attribution (``qkv.hf.attribute``) and, optionally, activation patching of
the same prompt (``qkv.hf.patching``), the layers × heads grid of signed values with its
diverging colour scale's range, the top heads named, the shares that add up to the logit
difference, and for each head split by key its per-key parts and its weights row.

    logit_diff = embed + Σ_layers Σ_h heads[layer, h] + Σ_layers mlp[layer] + rest
    heads[layer, h] = Σ_j part_j,   part_j = weights_j · (v_j W_O^h) · d

Both results are read through their ``to_dict()`` (or given as those dicts), so this module
needs neither torch nor transformers.
"""

from __future__ import annotations

import math

import numpy as np

from qkv.explain.tokens import labels, visible

TOP = 5  # heads named beside the grid
COLOURS = {
    "attribution": "each head's share of the logit difference (its z through its slice of W_O "
    "and the frozen final norm): red adds to it, blue takes away",
    "patching": "the fraction of LD_clean − LD_corrupted restored by putting the head's clean z "
    "into the corrupted run: red restores, blue works against it",
}


def _plain(result, what: str) -> dict:
    """A result's ``to_dict()``, or the dict itself."""
    if isinstance(result, dict):
        return result
    to_dict = getattr(result, "to_dict", None)
    if not callable(to_dict):
        raise TypeError(
            f"{what} must be a qkv.hf.{'attribute' if what == 'attribution' else what}(...) "
            f"result or its to_dict(), got {type(result).__name__}"
        )
    return to_dict()


def is_attribution(obj) -> bool:
    """Whether ``obj`` is an attribution (``qkv.hf.Attribution`` or its ``to_dict()``)."""
    keys = ("heads", "mlp", "embed", "logit_diff", "by_key")
    if isinstance(obj, dict):
        return all(k in obj for k in keys)
    return all(hasattr(obj, k) for k in keys) and callable(getattr(obj, "to_dict", None))


def is_patching(obj) -> bool:
    """Whether ``obj`` is an activation-patching result (``qkv.hf.Patching`` or its dict)."""
    keys = ("clean", "corrupted", "corrupted_tokens", "heads")
    if isinstance(obj, dict):
        return all(k in obj for k in keys)
    return all(hasattr(obj, k) for k in keys) and callable(getattr(obj, "to_dict", None))


def scale(values: np.ndarray) -> list[float]:
    """The diverging colour scale's range, symmetric about 0: [−m, m], m = max |value| (1 when
    every value is 0)."""
    finite = values[np.isfinite(values)]
    m = float(np.max(np.abs(finite))) if finite.size else 0.0
    m = m if m > 0 else 1.0
    return [-m, m]


def token_named(token: dict) -> dict:
    """{token, id} with its label as qkv prints it (" Mary" -> "␣Mary")."""
    return {"token": token["token"], "id": int(token["id"]), "label": visible(token["token"])}


def quantity(target: dict, baseline: dict | None) -> str:
    """What is explained, in words: "logit(␣Mary) − logit(␣John)" or "logit(␣Mary)"."""
    t = f"logit({target['label']})"
    return t if baseline is None else f"{t} − logit({baseline['label']})"


def split(entry: dict, tokens: list[str]) -> dict:
    """One head's share split by key (a ``KeySplit.to_dict()``): every key with its label, its
    attention weight at the explained position (the head's pattern row) and its part."""
    weights = [float(w) for w in entry["weights"]]
    parts = [float(p) for p in entry["parts"]]
    if len(weights) != len(parts) or len(parts) > len(tokens):
        raise ValueError(
            f"head {entry['layer']}.{entry['head']}'s split has {len(weights)} weights and "
            f"{len(parts)} parts; expected one each per key of the {len(tokens)}-token prompt"
        )
    keys = [
        {"key": j, "token": tokens[j], "weight": w, "part": p}
        for j, (w, p) in enumerate(zip(weights, parts, strict=True))
    ]
    return {
        "layer": int(entry["layer"]),
        "head": int(entry["head"]),
        "value": float(entry["value"]),
        "sum": math.fsum(parts),
        "keys": keys,
        "range": scale(np.array(parts)),
    }


def _same_question(a: dict, p: dict) -> None:
    """A ValueError unless the patching result explains the same token of the same prompt."""
    for key in ("tokens", "position", "target", "baseline"):
        if a.get(key) != p.get(key):
            raise ValueError(
                f"the patching result must be of the attribution's prompt, position, target "
                f"and baseline; its {key} differs: {p.get(key)!r} (patching) vs "
                f"{a.get(key)!r} (attribution)"
            )
    if np.shape(p["heads"]) != np.shape(a["heads"]):
        raise ValueError(
            f"the patching grid must have the attribution's shape {np.shape(a['heads'])}, "
            f"got {np.shape(p['heads'])}"
        )


def panel(attribution, patching=None, *, top: int = TOP) -> dict:
    """The panel's data (see the module): plain lists and numbers, drawn by ``web/static/why.js``.

    ``attribution``: a ``qkv.hf.attribute`` result (or its ``to_dict()``); ``patching``: a
    ``qkv.hf.patching`` result of the same prompt, target and baseline, or None. The grid is
    coloured by patching when it is given, else by attribution; ``top`` heads are named.
    """
    a = _plain(attribution, "attribution")
    if not is_attribution(a):
        raise TypeError("attribution must be a qkv.hf.attribute(...) result or its to_dict()")
    p = None if patching is None else _plain(patching, "patching")
    if p is not None:
        _same_question(a, p)
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValueError(f"top must be an int ≥ 0, got {top!r}")
    heads = np.asarray(a["heads"], dtype=np.float64)  # (n_layers, n_heads)
    if heads.ndim != 2:
        raise ValueError(f"heads must be (n_layers, n_heads), got shape {heads.shape}")
    mlp = np.asarray(a["mlp"], dtype=np.float64)  # (n_layers,)
    tokens = labels(a["tokens"], len(a["tokens"]))
    target = token_named(a["target"])
    baseline = None if a.get("baseline") is None else token_named(a["baseline"])
    grids = {"attribution": {"values": heads.tolist(), "range": scale(heads), "unit": "logit"}}
    scores = None
    if p is not None:
        scores = np.asarray(p["heads"], dtype=np.float64)
        grids["patching"] = {"values": scores.tolist(), "range": scale(scores), "unit": "fraction"}
    colour = "patching" if scores is not None else "attribution"
    ranked = scores if scores is not None else heads
    order = np.argsort(-np.abs(np.nan_to_num(ranked)), axis=None, kind="stable")[:top]
    named = [
        {
            "layer": int(i),
            "head": int(h),
            "attribution": float(heads[i, h]),
            "patching": None if scores is None else float(scores[i, h]),
        }
        for i, h in zip(*np.unravel_index(order, heads.shape), strict=True)
    ]
    splits = {f"{e['layer']}.{e['head']}": split(e, tokens) for e in a.get("by_key") or []}
    shares = {
        "embed": float(a["embed"]),
        "heads": math.fsum(heads.ravel().tolist()),
        "mlp": math.fsum(mlp.tolist()),
        "rest": float(a["rest"]),
    }
    return {
        "kind": "why",
        "tokens": tokens,
        "position": int(a["position"]),
        "target": target,
        "baseline": baseline,
        "quantity": quantity(target, baseline),
        "logit_diff": float(a["logit_diff"]),
        "shape": list(heads.shape),
        "colour": colour,
        "colours": {k: COLOURS[k] for k in grids},
        "grids": grids,
        "shares": {**shares, "total": math.fsum(shares.values())},
        "mlp": mlp.tolist(),
        "top": named,
        "splits": splits,
        "patching": None
        if p is None
        else {
            "clean": float(p["clean"]),
            "corrupted": float(p["corrupted"]),
            "corrupted_tokens": labels(p["corrupted_tokens"], len(p["corrupted_tokens"])),
        },
    }


def check_not_patching(obj, patching) -> None:
    """The errors of showing a patching result without its attribution."""
    if is_patching(obj) or patching is not None:
        raise TypeError(
            "a patching result is shown beside the attribution of the same prompt, target "
            "and baseline: qkv.show(qkv.hf.attribute(...), patching=qkv.hf.patching(...))"
        )
