"""The view of one object, as ``qkv.show`` and ``qkv export`` draw it: the controls it offers and
the page's payload for a chosen query token, temperature τ, head and layer, computed by qkv's
engine.

Three kinds of object, told apart by what they hold (this module imports none of their
classes): a built-in scene (``qkv.presets.load(...)``: reruns ``Scene.trace`` at any τ), a
``Trace`` (one head: rerun from its q, k, v at any τ; several heads: fixed τ, since the trace
holds no W_O to recompute ``out``), and a real model's run (``ModelTrace``: every layer and head,
each head rerun from its q, k, v at any τ; the layers × heads grid stays at the model's τ).
The payload has the shape of the server's ``POST /api/trace`` answer (``selection.answer``).
"""

from __future__ import annotations

import functools

import numpy as np

from qkv import checks
from qkv.attention import attention
from qkv.explain.html import count, shape_words
from qkv.explain.tokens import labels, pick
from qkv.trace import STEPS
from qkv.views import grid, long_text, picture, selection, zoom

TRACE_STEPS = ("q", "k", "v")  # what a one-head trace needs to be rerun at another τ


def _rerun(tr, temperature: float):
    """A one-head trace recomputed at ``temperature`` from its q, k, v, scale and mask."""
    s = tr.settings
    _, new = attention(
        tr["q"],
        tr["k"],
        tr["v"],
        mask=s.get("mask"),
        causal=s.get("causal") or False,
        scale=s["scale"],
        temperature=temperature,
        return_trace=True,
    )
    if "x" in tr:
        new.steps = {"x": tr["x"], **new.steps}
    new.tokens = tr.tokens
    return new


class View:
    """Base: the sizes, the controls offered, and the payload for one choice."""

    kind = ""
    tokens: list[str]
    n_heads: int | None = None
    layers: list[int] | None = None
    temperature = 1.0  # the object's own τ
    tau_fixed_because: str | None = None  # why τ cannot move (None: it can)
    select = 0
    d_model: int | None = None
    dtype: np.dtype = np.dtype(np.float64)  # of the numbers shown
    title = ""
    lesson = ""

    def words(self) -> str:
        raise NotImplementedError

    def grid(self) -> dict | None:
        return None

    def info(self) -> dict:
        """What the view's controls need; sent once (steps: the trace's step names, whose
        pipeline stages the heatmap offers, as the page reads them from ``/api/limits``)."""
        tau = (
            {"fixed": self.temperature, "why": self.tau_fixed_because}
            if self.tau_fixed_because
            else {"fixed": None, "why": ""}
        )
        return {
            "kind": self.kind,
            "title": self.title,
            "lesson": self.lesson,
            "words": self.words(),
            "tokens": self.tokens,
            "n_heads": self.n_heads,
            "layers": self.layers,
            "d_model": self.d_model,
            "tau": tau,
            "grid": self.grid(),
            "steps": list(STEPS),
            "long": self.long,
        }

    def check(self, *, select: int, temperature: float, head: int, layer: int) -> None:
        """A ValueError naming the allowed range for a value this view cannot show."""
        L = len(self.tokens)
        if not 0 <= select < L:
            raise ValueError(f"select must be a token index in [0, {L}), got {select}")
        checks.temperature_value(temperature)
        if self.tau_fixed_because and temperature != self.temperature:
            raise ValueError(
                f"temperature is fixed at {self.temperature} here: {self.tau_fixed_because}"
            )
        heads = self.n_heads or 1
        if not 0 <= head < heads:
            raise ValueError(
                f"head must be in [0, {heads}), got {head}"
                + ("" if self.n_heads else " (this view has a single head)")
            )
        if self.layers is not None and layer not in self.layers:
            raise ValueError(f"layer must be one of {self.layers}, got {layer}")
        if self.layers is None and layer != 0:
            raise ValueError(f"layer must be 0 (this view has no layers), got {layer}")

    @property
    def long(self) -> bool:
        """Past ``long_text.PANEL_TOKENS`` tokens the panels (every number of a head) give way
        to what fits a screen: the pooled heatmap, the selected row, its top keys."""
        return len(self.tokens) > long_text.PANEL_TOKENS

    def shown(self, *, temperature: float, head: int, layer: int):
        """(trace, head): the trace whose readers give the chosen head at τ, and the head to
        read from it (None when that trace has no head axis)."""
        tr = self._trace(float(temperature), head, layer)[0]
        return tr, (head if tr.settings.get("n_heads") else None)

    def picture(self, *, select: int, temperature: float, head: int = 0, layer: int = 0):
        """The still picture of one choice (``views.picture``)."""
        self.check(select=select, temperature=temperature, head=head, layer=layer)
        tr, h = self.shown(temperature=temperature, head=head, layer=layer)
        return picture.picture(tr, select, head=h)

    def settings(self, *, select: int, temperature: float, head: int, layer: int) -> dict:
        return {
            "preset": self.key(layer),
            "select": select,
            "head": head,
            "layer": layer,
            "temperature": float(temperature),
        }

    def brief(self, *, select: int, temperature: float, head: int = 0, layer: int = 0) -> dict:
        """A long text's answer for one choice: settings and the selected query's row in
        numbers (``long_text.selected``); no L × S array."""
        self.check(select=select, temperature=temperature, head=head, layer=layer)
        tr, h = self.shown(temperature=temperature, head=head, layer=layer)
        settings = self.settings(select=select, temperature=temperature, head=head, layer=layer)
        del settings["preset"]  # names every token: the view has them in ``info``
        return {
            "settings": settings,
            "selected": {**long_text.selected(tr, select, h, self.tokens), "head": head},
        }

    def payload(self, *, select: int, temperature: float, head: int = 0, layer: int = 0) -> dict:
        """The page's answer for one choice: scene, settings, trace, selected row, walkthrough."""
        self.check(select=select, temperature=temperature, head=head, layer=layer)
        tr, tr_dict, walk_trace = self._trace(float(temperature), head, layer)
        shown = selection.answer(
            tr, select, head if self.n_heads else None, walk=walk_trace, trace_dict=tr_dict
        )
        if self.dtype == np.float32:  # its shortest digits: the same numbers, half the text
            sel = shown["selected"]
            shown["selected"] = {
                **sel,
                "contributions": selection.float32_text(sel["contributions"]),
            }
        return {
            "scene": {"tokens": self.tokens, "d_model": self.d_model},
            "settings": self.settings(
                select=select, temperature=temperature, head=head, layer=layer
            ),
            **shown,
        }

    def key(self, layer: int) -> str:
        """Names the token set and layer: the page rebuilds its token buttons when it changes."""
        return f"{self.kind}|{self.title}|{layer}|" + "|".join(self.tokens)

    def _trace(self, temperature: float, head: int, layer: int):
        """(trace shown, its dict, the trace the walkthrough reads); cached per τ, head, layer."""
        raise NotImplementedError


class SceneView(View):
    kind = "scene"

    def __init__(self, scene):
        self.scene = scene
        self.tokens = labels(list(scene.tokens), len(scene.tokens))
        self.n_heads = scene.n_heads
        self.select = scene.select
        self.d_model = int(scene.x.shape[1])
        self.title = f"{scene.name} · {scene.title}"
        self.lesson = scene.lesson

    def words(self) -> str:
        tr = self._trace(self.temperature, 0, 0)[0]
        s = tr.settings
        return (
            shape_words(s["L"], s["S"], s["d_k"], s["d_v"], self.n_heads)
            + f", d_model = {self.d_model}"
        )

    @functools.lru_cache(maxsize=16)  # noqa: B019 - a view lives as long as its widget
    def _trace(self, temperature: float, head: int, layer: int):
        tr = self.scene.trace(temperature=temperature)  # (the head axis holds every head)
        return tr, selection.float32_digits(tr.to_dict()), tr


class TraceView(View):
    kind = "trace"

    def __init__(self, trace):
        tr = trace.numpy()
        s = tr.settings
        q = tr["q"] if "q" in tr else tr["weights"]  # (…, [H,] L, d_k or S): its axes, unread
        self.n_heads = s.get("n_heads") or None
        L, S = s["L"], s["S"]
        if q.ndim != (3 if self.n_heads else 2):
            raise ValueError(
                f"qkv.show draws one sequence: weights of shape ([n_heads,] L, S), "
                f"got {(*q.shape[:-1], S)}; index the batch axis before tracing"
            )
        if L != S:
            raise ValueError(
                f"qkv.show draws self-attention (as many queries as keys), got "
                f"L = {L} queries × S = {S} keys; the trace's own display "
                "(_repr_html_) shows any shape"
            )
        self.trace = tr
        self.dtype = np.result_type(q.dtype, np.float32)
        self.tokens = labels(tr.tokens, L)
        self.select = L - 1
        self.temperature = float(s.get("temperature", 1.0))
        self.d_model = int(tr["x"].shape[-1]) if "x" in tr else None
        self.title = "trace"
        if self.n_heads:
            self.tau_fixed_because = (
                "a multi-head trace holds no W_O, so out cannot be "
                "recomputed at another τ: show the scene or rerun it"
            )
        elif not all(n in tr for n in TRACE_STEPS):
            self.tau_fixed_because = "this trace holds no q, k, v to rerun at another τ"

    def words(self) -> str:
        s = self.trace.settings
        return shape_words(s["L"], s["S"], s["d_k"], s["d_v"], self.n_heads)

    @functools.lru_cache(maxsize=16)  # noqa: B019 - a view lives as long as its widget
    def _trace(self, temperature: float, head: int, layer: int):
        tr = self.trace if temperature == self.temperature else _rerun(self.trace, temperature)
        return tr, selection.float32_digits(tr.to_dict()), tr


class ModelView(View):
    kind = "model"
    n_heads: int  # a model always has a head axis and layers
    layers: list[int]

    def __init__(self, run):
        self.run = run
        self.layers = sorted(run.layers)
        first = run.layers[self.layers[0]]
        s = first.settings
        self.tokens = labels(list(run.tokens), len(run.tokens))
        self.n_heads = s["n_heads"]
        self.n_kv_heads = s.get("n_kv_heads") or self.n_heads
        self.d_head = s["d_k"]
        self.temperature = float(s.get("temperature", 1.0))
        self.select = len(self.tokens) - 1
        self.d_model = int(first["x"].shape[-1]) if "x" in first else None
        self.dtype = np.result_type(first["q"].dtype, np.float32)
        self.title = f"{run.model} · {count(len(self.tokens), 'token')}"

    def words(self) -> str:
        L = len(self.tokens)
        kv = (
            f" sharing {count(self.n_kv_heads, 'K/V head')}"
            if self.n_kv_heads != self.n_heads
            else ""
        )
        return (
            f"{count(len(self.layers), 'layer')} × {count(self.n_heads, 'head')}{kv}; each "
            f"head: {shape_words(L, L, self.d_head, self.d_head)}, d_model = {self.d_model}"
        )

    def grid(self) -> dict | None:
        if self.long:
            return None  # every head pooled: asked for when its panel opens (requests.py)
        g = grid.grid_of({i: self.run.layers[i] for i in self.layers})  # ≤ 64 × 64 a head
        note = (
            "One thumbnail per head: queries down, keys across, darker = more weight "
            f"(shade ∝ √weight) at the model's τ = {self.temperature:g}. Click one to "
            "inspect it below; thumbnails are rounded to 1/255, the panels hold the exact "
            "numbers."
        )
        return {**g, "layers": self.layers, "note": note}

    def shown(self, *, temperature: float, head: int, layer: int):
        if not self.long:
            return super().shown(temperature=temperature, head=head, layer=layer)
        return self._head(float(temperature), head, layer), None

    @functools.lru_cache(maxsize=4)  # noqa: B019 - a view lives as long as its widget
    def _head(self, temperature: float, head: int, layer: int):
        """The chosen head as a lazy trace: nothing computed until a reader asks."""
        return zoom.at_temperature(self.run.layer(layer), temperature).head(head)

    @functools.lru_cache(maxsize=2)  # noqa: B019 - a view lives as long as its widget
    def thumbnails(self, size: int):
        """Every head of every layer max-pooled to at most size × size (``zoom.thumbnails``),
        at the model's τ."""
        return zoom.thumbnails({i: self.run.layers[i] for i in self.layers}, size)

    @functools.lru_cache(maxsize=16)  # noqa: B019 - a view lives as long as its widget
    def _trace(self, temperature: float, head: int, layer: int):
        layer_trace = self.run.layer(layer)
        tr = selection.one_head(layer_trace, head)
        if temperature == self.temperature:
            return tr, selection.float32_digits(tr.to_dict()), layer_trace
        tr = _rerun(tr, temperature)
        return tr, selection.float32_digits(tr.to_dict()), tr


def view_of(obj) -> View:
    """The view of a scene, a Trace or a model's run; a TypeError for anything else."""
    if isinstance(obj, View):
        return obj
    if hasattr(obj, "layers") and hasattr(obj, "tokens") and callable(getattr(obj, "layer", None)):
        return ModelView(obj)
    if hasattr(obj, "W_Q") and callable(getattr(obj, "trace", None)):
        return SceneView(obj)
    if hasattr(obj, "steps") and hasattr(obj, "settings"):
        if "weights" not in obj.steps:
            raise ValueError(f"this trace has no weights to draw; it has {list(obj.steps)}")
        return TraceView(obj)
    raise TypeError(
        "qkv.show takes a scene (qkv.presets.load(name)), a qkv.Trace or a model's "
        f"run (qkv.models.load(name).trace(text)), got {type(obj).__name__}"
    )


def token_of(view: View, token) -> int:
    """A query token of the view by index or by text (``explain.tokens.pick``)."""
    return pick(view.tokens, token)
