"""Trace: every named step of one attention computation, with its settings and token labels."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qkv.steps import kv_head

# The project's one vocabulary for the steps, in data-flow order (DESIGN.md).
# "rope" (rotary models only) holds q and k before rotation; "q" and "k" then hold them after.
# "capped" (soft-capping), "biased" (an additive bias) and "sink" (the weight an attention sink
# takes, (..., L, 1)) appear only when the computation has them.
STEPS = ("x", "q", "k", "v", "rope", "scores", "scaled", "tempered", "capped", "biased",
         "masked", "weights", "sink", "z", "head_out", "out")

FORMAT = "qkv.trace/1"


def to_numpy(a) -> np.ndarray:
    """A NumPy copy-free view of an array or torch tensor (detached, on the CPU)."""
    if hasattr(a, "detach"):
        a = a.detach().cpu()
        if str(a.dtype) == "torch.bfloat16":  # NumPy has no bfloat16
            a = a.float()
    return np.asarray(a)


@dataclass
class Trace:
    """The steps of one attention computation.

    ``steps`` maps step names (``STEPS``) to arrays with the head axis kept (axis -3 where there
    are heads); read one as ``trace["weights"]`` or ``trace.weights``. ``settings`` holds what was
    used: ``scale``, ``temperature``, ``causal`` (alignment name or None), ``mask`` (the boolean
    mask actually applied, causal included, or None), and the sizes ``L``, ``S``, ``d_k``, ``d_v``,
    ``n_heads``, ``n_kv_heads`` (None where there is no head axis). ``tokens`` labels positions.
    """

    steps: dict[str, Any]
    settings: dict[str, Any]
    tokens: list[str] | None = None
    key_tokens: list[str] | None = field(default=None)

    def __post_init__(self):
        unknown = set(self.steps) - set(STEPS)
        if unknown:
            raise ValueError(f"unknown step names {sorted(unknown)}; expected names from {STEPS}")

    def __getitem__(self, name: str):
        if name not in self.steps:
            raise KeyError(f"step {name!r} is not in this trace; it has {list(self.steps)}")
        return self.steps[name]

    def __getattr__(self, name: str):
        if name in STEPS:
            try:
                return self.steps[name]
            except KeyError:
                raise AttributeError(f"step {name!r} is not in this trace; it has "
                                     f"{list(self.steps)}") from None
        raise AttributeError(name)

    def __contains__(self, name: str) -> bool:
        return name in self.steps

    @property
    def names(self) -> list[str]:
        """Step names present, in data-flow order."""
        return [s for s in STEPS if s in self.steps]

    def numpy(self) -> "Trace":
        """The same trace with every array as a NumPy array."""
        steps = {k: to_numpy(a) for k, a in self.steps.items()}
        settings = dict(self.settings)
        if settings.get("mask") is not None:
            settings["mask"] = to_numpy(settings["mask"])
        return Trace(steps, settings, self.tokens, self.key_tokens)

    def contributions(self, i: int, *, head: int | None = None) -> np.ndarray:
        """The per-key terms w_ij·v_j of query i, whose sum over keys j is z_i.

        Returns (..., S, d_v) with the head axis kept, or only head ``head`` when given.
        """
        w = to_numpy(self.steps["weights"])  # (..., [H,] L, S)
        v = to_numpy(self.steps["v"])  # (..., [G,] S, d_v)
        L = w.shape[-2]
        if not -L <= i < L:
            raise IndexError(f"query index must be in [0, {L}), got {i}")
        n_heads = self.settings.get("n_heads")
        n_kv = self.settings.get("n_kv_heads") or n_heads
        if n_heads and n_kv and n_heads != n_kv:  # each K/V head serves its query group
            v = v[..., [kv_head(h, n_heads, n_kv) for h in range(n_heads)], :, :]
        terms = w[..., i, :, None] * v  # (..., [H,] S, 1) * (..., [H,] S, d_v) -> (..., [H,] S, d_v)
        if head is None:
            return terms
        if not n_heads:
            raise ValueError("this trace has no head axis; call contributions(i) without head=")
        if not -n_heads <= head < n_heads:
            raise IndexError(f"head must be in [0, {n_heads}), got {head}")
        return terms[..., head, :, :]

    # ---- JSON ------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """A JSON-ready dict; arrays as {dtype, shape, data}, non-finite numbers as strings."""
        settings = {k: v for k, v in self.settings.items() if k != "mask"}
        mask = self.settings.get("mask")
        return {
            "format": FORMAT,
            "tokens": self.tokens,
            "key_tokens": self.key_tokens,
            "settings": settings,
            "mask": None if mask is None else _encode(to_numpy(mask)),
            "steps": {k: _encode(to_numpy(a)) for k, a in self.steps.items()},
        }

    def to_json(self, **kwargs) -> str:
        """JSON text that ``from_json`` turns back into an equal trace (−inf and NaN included)."""
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    @classmethod
    def from_dict(cls, d: dict) -> "Trace":
        if d.get("format") != FORMAT:
            raise ValueError(f"expected a trace in format {FORMAT!r}, got {d.get('format')!r}")
        settings = dict(d["settings"])
        settings["mask"] = None if d.get("mask") is None else _decode(d["mask"])
        steps = {k: _decode(a) for k, a in d["steps"].items()}
        return cls(steps, settings, d.get("tokens"), d.get("key_tokens"))

    @classmethod
    def from_json(cls, text: str) -> "Trace":
        return cls.from_dict(json.loads(text))

    # ---- notebook display ------------------------------------------------------------------

    def _repr_html_(self) -> str:
        from qkv.explain.html import render

        return render(self.numpy())


def _encode(a: np.ndarray) -> dict:
    if a.dtype == np.bool_:
        data = a.tolist()
    else:
        data = _finite_or_text(a.astype(np.float64).tolist() if a.ndim else float(a))
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": data}


def _finite_or_text(x):
    if isinstance(x, list):
        return [_finite_or_text(e) for e in x]
    return x if math.isfinite(x) else repr(x)  # 'inf', '-inf', 'nan'


def _decode(d: dict) -> np.ndarray:
    dtype = np.dtype(d["dtype"])
    shape = tuple(d["shape"])
    if dtype == np.bool_:
        return np.array(d["data"], dtype=bool).reshape(shape)
    data = _text_to_float(d["data"])
    return np.array(data, dtype=np.float64).astype(dtype).reshape(shape)


def _text_to_float(x):
    if isinstance(x, list):
        return [_text_to_float(e) for e in x]
    return float(x)
