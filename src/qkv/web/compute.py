"""A validated request → a Scene → the engine's trace and walkthrough, as the API returns them.

No attention math lives here: the scene runs through ``Scene.trace`` (``qkv.attention`` or
``MultiHeadAttention.from_weights``), the prose comes from ``qkv.explain.walkthrough``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from qkv import presets
from qkv.explain import walkthrough
from qkv.ops import entropy
from qkv.presets import Scene
from qkv.web.schemas import SceneData, SceneInfo, TraceRequest


class FieldError(ValueError):
    """A request that is well-formed JSON but does not fit together; names the field."""

    def __init__(self, field: str, message: str, status: int = 422):
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


def load_preset(name: str, field: str = "preset") -> Scene:
    try:
        return presets.load(name)
    except ValueError as e:
        raise FieldError(field, str(e), status=404 if field == "name" else 422) from None


def scene_info(scene: Scene) -> SceneInfo:
    return SceneInfo(name=scene.name, title=scene.title, lesson=scene.lesson,
                     tokens=list(scene.tokens), select=scene.select, scaled=scene.scaled,
                     n_heads=scene.n_heads, d_model=scene.x.shape[1])


def scene_data(scene: Scene) -> SceneData:
    def heads(W):  # single-head scenes: (d_model, d) -> (1, d_model, d)
        return (W if W.ndim == 3 else W[None]).tolist()

    return SceneData(**scene_info(scene).model_dump(), x=scene.x.tolist(),
                     W_Q=heads(scene.W_Q), W_K=heads(scene.W_K), W_V=heads(scene.W_V),
                     W_O=None if scene.W_O is None else scene.W_O.tolist(),
                     b_O=None if scene.b_O is None else scene.b_O.tolist())


def _array(field: str, data) -> np.ndarray:
    """Nested lists → float64 array; ragged rows are a 422 naming the field."""
    try:
        return np.array(data, dtype=np.float64)
    except ValueError:
        lengths = sorted({len(r) for r in data}) if data and isinstance(data[0], list) else []
        raise FieldError(field, f"{field} must be rectangular (every row the same length), "
                                f"got rows of lengths {lengths}") from None


def _expect(field: str, a: np.ndarray, shape: tuple, meaning: str) -> None:
    if a.shape != shape:
        raise FieldError(field, f"{field} must have shape {meaning} = {shape}, got "
                                f"{a.shape}")


def build_scene(req: TraceRequest) -> Scene:
    """The preset with the request's replacements, every shape checked against the others."""
    base = load_preset(req.preset)
    multi = base.W_O is not None
    tokens = tuple(req.tokens) if req.tokens is not None else base.tokens
    x = base.x if req.x is None else _array("x", req.x)
    L = len(tokens)
    if x.ndim != 2 or x.shape[0] != L:
        raise FieldError("x", f"x must have one row per token, shape (L={L}, d_model), got "
                              f"{x.shape}" + ("" if req.tokens else " (send tokens too to "
                                              "change L)"))
    d_model = x.shape[1]

    def weights(name):
        given = getattr(req, name)
        if given is None:
            W = getattr(base, name)
            return None if W is None else (W if W.ndim == 3 else W[None])
        return _array(name, given)

    W_Q, W_K, W_V = weights("W_Q"), weights("W_K"), weights("W_V")
    H = W_Q.shape[0]
    _expect("W_Q", W_Q, (H, d_model, W_Q.shape[2]), "(n_heads, d_model, d_head)")
    d_head, d_v = W_Q.shape[2], W_V.shape[2]
    _expect("W_K", W_K, (H, d_model, d_head), "(n_heads, d_model, d_head)")
    _expect("W_V", W_V, (H, d_model, d_v), "(n_heads, d_model, d_v)")
    if not multi:
        for name in ("W_O", "b_O"):
            if getattr(req, name) is not None:
                raise FieldError(name, f"{name} is only for multi-head scenes; preset "
                                       f"{base.name!r} is single-head")
        if H != 1:
            raise FieldError("W_Q", f"preset {base.name!r} is single-head: W_Q, W_K, W_V must "
                                    f"have 1 head, got {H}")
        return dataclasses.replace(base, tokens=tokens, x=x, W_Q=W_Q[0], W_K=W_K[0],
                                   W_V=W_V[0], select=min(base.select, L - 1))
    W_O = weights("W_O")
    _expect("W_O", W_O, (H, d_v, d_model), "(n_heads, d_v, d_model)")
    b_O = base.b_O if req.b_O is None else _array("b_O", req.b_O)
    _expect("b_O", b_O, (d_model,), "(d_model,)")
    return dataclasses.replace(base, tokens=tokens, x=x, W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O,
                               b_O=b_O, select=min(base.select, L - 1))


def run(req: TraceRequest) -> dict:
    """The API's answer to one trace request (see ``TraceResponse``)."""
    scene = build_scene(req)
    L = len(scene.tokens)
    i = scene.select if req.select is None else req.select
    if i >= L:
        raise FieldError("select", f"select must be a token index in [0, {L}), got {i}")
    n_heads = scene.n_heads
    if n_heads is None and req.head not in (None, 0):
        raise FieldError("head", f"scene {scene.name!r} has a single head; head must be 0 or "
                                 f"absent, got {req.head}")
    head = None if n_heads is None else (req.head or 0)
    if head is not None and head >= n_heads:
        raise FieldError("head", f"head must be in [0, {n_heads}), got {head}")
    scaled = scene.scaled if req.scaled is None else req.scaled
    if n_heads is not None and not scaled:
        raise FieldError("scaled", f"scene {scene.name!r} is multi-head and always scales by "
                                   "1/√d_head; scaled must be true")
    causal = req.align if req.causal else False
    trace = scene.trace(temperature=req.temperature, scaled=scaled, causal=causal)

    pick = (lambda a: a) if head is None else (lambda a: a[head])
    w = pick(trace["weights"])[i]  # (S,)
    ent = float(entropy(w))
    mask = trace.settings["mask"]
    visible = w.shape[0] if mask is None else int(np.broadcast_to(
        mask, pick(trace["weights"]).shape)[i].sum())
    return {
        "scene": scene_info(scene).model_dump(),
        "settings": {"preset": scene.name, "select": i, "head": head,
                     "temperature": req.temperature, "scaled": scaled, "causal": req.causal,
                     "align": req.align},
        "trace": trace.to_dict(),
        "selected": {"index": i, "head": head, "weights_sum": float(w.sum()), "entropy": ent,
                     "effective_tokens": math.exp(ent), "visible_keys": visible,
                     "contributions": trace.contributions(i, head=head).tolist()},
        "walkthrough": [{"title": s.title, "lines": list(s.lines)}
                        for s in walkthrough(trace, i, head=head)],
    }
