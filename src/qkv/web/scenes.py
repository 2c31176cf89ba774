"""The scenes' API: the built-in presets and a trace of any scene the page edits.

    GET  /api/presets           the built-in scenes
    GET  /api/presets/{name}    one scene with its numbers (x, W_Q, W_K, W_V[, W_O, b_O])
    POST /api/trace             a trace, the selected row's numbers and the walkthrough

A validated request becomes a ``Scene``; no attention math lives here: the scene runs through
``Scene.trace`` (``qkv.attention`` or ``MultiHeadAttention.from_weights``) and the page's
payload comes from ``qkv.views``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from qkv.explain import scenes
from qkv.views import selection
from qkv.web.errors import FieldError
from qkv.web.schemas import (
    MAX_NAME_CHARS,
    SceneData,
    SceneInfo,
    TraceRequest,
    TraceResponse,
)

router = APIRouter()


@router.get("/api/presets", response_model=list[SceneInfo])
def list_presets():
    """The built-in scenes, the default first."""
    return [scene_info(scenes.load(n)) for n in scenes.names()]


@router.get(
    "/api/presets/{name}",
    response_model=SceneData,
    responses={404: {"description": "unknown preset"}},
)
def get_preset(name: str = Path(max_length=MAX_NAME_CHARS)):
    """One scene with its numbers, W_Q, W_K, W_V with a head axis (single-head: 1 head)."""
    return scene_data(load_preset(name, field="name"))


@router.post(
    "/api/trace",
    response_model=TraceResponse,
    responses={422: {"description": "a field is missing, malformed or inconsistent"}},
)
def trace(req: TraceRequest):
    """Run the scene through the engine: trace, the selected row's numbers, walkthrough."""
    # Answered as built: the shape is TraceResponse's by construction (tests check it against
    # the schema), and re-validating every array would double the request's time.
    return JSONResponse(run(req))


def load_preset(name: str, field: str = "preset") -> scenes.Scene:
    try:
        return scenes.load(name)
    except ValueError as e:
        raise FieldError(field, str(e), status=404 if field == "name" else 422) from None


def scene_info(scene: scenes.Scene) -> SceneInfo:
    return SceneInfo(**selection.scene_summary(scene))


def scene_data(scene: scenes.Scene) -> SceneData:
    def heads(W):  # single-head scenes: (d_model, d) -> (1, d_model, d)
        return (W if W.ndim == 3 else W[None]).tolist()

    return SceneData(
        **scene_info(scene).model_dump(),
        x=scene.x.tolist(),
        W_Q=heads(scene.W_Q),
        W_K=heads(scene.W_K),
        W_V=heads(scene.W_V),
        W_O=None if scene.W_O is None else scene.W_O.tolist(),
        b_O=None if scene.b_O is None else scene.b_O.tolist(),
    )


def _array(field: str, data) -> np.ndarray:
    """Nested lists → float64 array; ragged rows are a 422 naming the field."""
    try:
        return np.array(data, dtype=np.float64)
    except ValueError:
        lengths = sorted({len(r) for r in data}) if data and isinstance(data[0], list) else []
        raise FieldError(
            field,
            f"{field} must be rectangular (every row the same length), "
            f"got rows of lengths {lengths}",
        ) from None


def _expect(field: str, a: np.ndarray, shape: tuple, meaning: str) -> None:
    if a.shape != shape:
        raise FieldError(field, f"{field} must have shape {meaning} = {shape}, got {a.shape}")


def build_scene(req: TraceRequest) -> scenes.Scene:
    """The preset with the request's replacements, every shape checked against the others."""
    base = load_preset(req.preset)
    multi = base.W_O is not None
    tokens = tuple(req.tokens) if req.tokens is not None else base.tokens
    x = base.x if req.x is None else _array("x", req.x)
    L = len(tokens)
    if x.ndim != 2 or x.shape[0] != L:
        raise FieldError(
            "x",
            f"x must have one row per token, shape (L={L}, d_model), got "
            f"{x.shape}" + ("" if req.tokens else " (send tokens too to change L)"),
        )
    d_model = x.shape[1]

    def projection(name):
        given = getattr(req, name)
        if given is None:
            W = getattr(base, name)
            return None if W is None else (W if W.ndim == 3 else W[None])
        return _array(name, given)

    W = {name: projection(name) for name in ("W_Q", "W_K", "W_V")}
    H = W["W_Q"].shape[0]
    d_head, d_v = W["W_Q"].shape[2], W["W_V"].shape[2]
    _expect("W_Q", W["W_Q"], (H, d_model, d_head), "(n_heads, d_model, d_head)")
    _expect("W_K", W["W_K"], (H, d_model, d_head), "(n_heads, d_model, d_head)")
    _expect("W_V", W["W_V"], (H, d_model, d_v), "(n_heads, d_model, d_v)")
    if not multi:
        for name in ("W_O", "b_O"):
            if getattr(req, name) is not None:
                raise FieldError(
                    name,
                    f"{name} is only for multi-head scenes; preset {base.name!r} is single-head",
                )
        if H != 1:
            raise FieldError(
                "W_Q",
                f"preset {base.name!r} is single-head: W_Q, W_K, W_V must have 1 head, got {H}",
            )
        W = {name: w[0] for name, w in W.items()}  # a single-head scene's (d_model, d_k) layout
        W["W_O"] = W["b_O"] = None
    else:
        W["W_O"] = projection("W_O")
        _expect("W_O", W["W_O"], (H, d_v, d_model), "(n_heads, d_v, d_model)")
        W["b_O"] = base.b_O if req.b_O is None else _array("b_O", req.b_O)
        if W["b_O"] is not None:  # a multi-head scene may have no output bias
            _expect("b_O", W["b_O"], (d_model,), "(d_model,)")
    return dataclasses.replace(base, tokens=tokens, x=x, select=min(base.select, L - 1), **W)


def run(req: TraceRequest) -> dict:
    """The API's answer to one trace request (see ``TraceResponse``)."""
    scene = build_scene(req)
    L = len(scene.tokens)
    i = scene.select if req.select is None else req.select
    if i >= L:
        raise FieldError("select", f"select must be a token index in [0, {L}), got {i}")
    n_heads = scene.n_heads
    head: int | None = None
    if n_heads is None:
        if req.head not in (None, 0):
            raise FieldError(
                "head",
                f"scene {scene.name!r} has a single head; head must be 0 or absent, got {req.head}",
            )
    else:
        head = req.head or 0
        if head >= n_heads:
            raise FieldError("head", f"head must be in [0, {n_heads}), got {head}")
    scaled = scene.scaled if req.scaled is None else req.scaled
    if n_heads is not None and not scaled:
        raise FieldError(
            "scaled",
            f"scene {scene.name!r} is multi-head and always scales by "
            "1/√d_head; scaled must be true",
        )
    causal = req.align if req.causal else False
    extra = {"softcap": req.softcap, "sink": req.sink, "alibi": req.alibi}
    trace = scene.trace(temperature=req.temperature, scaled=scaled, causal=causal, **extra)

    return {
        "scene": scene_info(scene).model_dump(),
        "settings": {
            "preset": scene.name,
            "select": i,
            "head": head,
            "temperature": req.temperature,
            "scaled": scaled,
            "causal": req.causal,
            "align": req.align,
            **extra,
        },
        **selection.answer(trace, i, head),
    }
