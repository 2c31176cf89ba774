"""Trace: every named step of one attention computation, with its settings and token labels."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qkv import display
from qkv.readers import Readers
from qkv.steps import HEAD_STEPS, STEPS, kv_head

FORMAT = "qkv.trace/1"
# What ``from_json`` accepts: the dtypes ``to_json`` writes, and a size checked before any
# array is made (a 64-token, 8-head trace has ~33k numbers per step).
DTYPES = ("float16", "float32", "float64", "bool")
MAX_NDIM = 8
MAX_ELEMENTS = 1 << 24


def to_numpy(a) -> np.ndarray:
    """A NumPy copy-free view of an array or torch tensor (detached, on the CPU)."""
    if hasattr(a, "detach"):
        a = a.detach().cpu()
        if str(a.dtype) == "torch.bfloat16":  # NumPy has no bfloat16
            a = a.float()
    return np.asarray(a)


@dataclass(eq=False)
class Trace(Readers):
    """The steps of one attention computation.

    ``steps`` maps step names (``STEPS``) to arrays with the head axis kept (axis -3 where there
    are heads); read one as ``trace["weights"]`` or ``trace.weights``. ``settings`` holds what was
    used: ``scale``, ``temperature``, ``causal`` (alignment name or None), ``mask`` (the boolean
    mask actually applied, causal included, or None), and the sizes ``L``, ``S``, ``d_k``, ``d_v``,
    ``n_heads``, ``n_kv_heads`` (None where there is no head axis). ``tokens`` labels positions.

    Readers that take only what they show: ``head(h)``, ``rows``, ``block``, ``top_keys``,
    ``head_stats``, ``pooled`` (``qkv.readers``); a ``qkv.lazy.LazyTrace`` computes them on read.
    """

    steps: Mapping[str, Any]
    settings: Mapping[str, Any]
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
                raise AttributeError(
                    f"step {name!r} is not in this trace; it has {list(self.steps)}"
                ) from None
        raise AttributeError(name)

    def __contains__(self, name: str) -> bool:
        return name in self.steps

    # defining __eq__ leaves __hash__ None: a trace holds mutable arrays
    def __eq__(self, other) -> bool:
        """Same steps (dtype, shape and values, NaN equal to NaN), settings and tokens."""
        if not isinstance(other, Trace):
            return NotImplemented
        mine, theirs = self.numpy(), other.numpy()
        return (
            mine.tokens == theirs.tokens
            and mine.key_tokens == theirs.key_tokens
            and mine.steps.keys() == theirs.steps.keys()
            and mine.settings.keys() == theirs.settings.keys()
            and all(_same(mine.steps[n], theirs.steps[n]) for n in mine.steps)
            and all(_same(mine.settings[n], theirs.settings[n]) for n in mine.settings)
        )

    @property
    def names(self) -> list[str]:
        """Step names present, in data-flow order."""
        return [s for s in STEPS if s in self.steps]

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays this trace holds (its steps and its mask)."""
        arrays = [*self.steps.values(), self.settings.get("mask")]
        return sum({id(a): a.nbytes for a in map(to_numpy, filter(_is_array, arrays))}.values())

    def eager(self) -> Trace:
        """This trace with every step held (it is: a ``LazyTrace`` computes them)."""
        return self

    def head(self, h: int) -> Trace:
        """Query head ``h`` as a trace without a head axis (its K/V head chosen by group)."""
        s = self.settings
        n = s.get("n_heads")
        if not n:
            raise ValueError("this trace has no head axis")
        if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or not 0 <= h < n:
            raise IndexError(f"head must be in [0, {n}), got {h!r}")
        kv = kv_head(h, n, s.get("n_kv_heads"))
        kept = {
            name: a[..., kv if name in ("k", "v") else h, :, :]
            for name, a in self.steps.items()
            if name in HEAD_STEPS
        }
        if "x" in self.steps:
            kept = {"x": self.steps["x"], **kept}
        mask = s.get("mask")
        if mask is not None:
            mask = np.ascontiguousarray(
                np.broadcast_to(mask, self.steps["weights"].shape)[..., h, :, :]
            )
        settings = {k: v for k, v in s.items() if k not in ("mask", "n_heads", "n_kv_heads")}
        if len(s.get("sinks") or ()) > 1:
            settings["sinks"] = [s["sinks"][h]]  # the head's own sink logit
        settings.update(mask=mask, n_heads=None, n_kv_heads=None)
        return Trace(kept, settings, self.tokens, self.key_tokens)

    def _rows(self, name: str, head, r0: int, r1: int) -> np.ndarray:
        h = self._head_of(head)
        a = to_numpy(self[name])
        if h is not None and name != "x":
            n = self.settings["n_heads"]
            kv = kv_head(h, n, self.settings.get("n_kv_heads"))
            a = a[..., kv if name in ("k", "v") else h, :, :]
        if a.ndim != 2:
            raise ValueError(
                f"readers take one sequence: step {name!r} has shape {a.shape}; index the batch first"
            )
        return a[r0:r1]

    def numpy(self) -> Trace:
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
        terms = (
            w[..., i, :, None] * v
        )  # (..., [H,] S, 1) * (..., [H,] S, d_v) -> (..., [H,] S, d_v)
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
    def from_dict(cls, d: dict) -> Trace:
        """The trace ``to_dict`` wrote; anything else is a ValueError naming the field."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            got = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"format: expected a trace in format {FORMAT!r}, got {got!r}")
        for name in ("settings", "steps"):
            if not isinstance(d.get(name), dict):
                raise ValueError(f"{name}: expected an object, got {type(d.get(name)).__name__}")
        for name in ("tokens", "key_tokens"):
            labels = d.get(name)
            if labels is not None and not (
                isinstance(labels, list) and all(isinstance(t, str) for t in labels)
            ):
                raise ValueError(f"{name}: expected a list of strings or null")
        unknown = sorted(set(d["steps"]) - set(STEPS))
        if unknown:
            raise ValueError(f"steps: unknown step names {unknown}; expected names from {STEPS}")
        budget = [MAX_ELEMENTS]  # numbers left for the whole trace
        settings = dict(d["settings"])
        settings["mask"] = None if d.get("mask") is None else _decode(d["mask"], "mask", budget)
        steps = {k: _decode(a, f"steps.{k}", budget) for k, a in d["steps"].items()}
        return cls(steps, settings, d.get("tokens"), d.get("key_tokens"))

    @classmethod
    def from_json(cls, text: str) -> Trace:
        try:
            d = json.loads(text)
        except RecursionError:
            raise ValueError("trace JSON is nested too deeply") from None
        return cls.from_dict(d)

    # ---- notebook display ------------------------------------------------------------------

    def _repr_html_(self) -> str:
        return display.static_html("trace", self)

    def to_html(self, path=None, **kwargs) -> str:
        """One self-contained HTML file of the simulator's panels for this trace (every query
        token and head precomputed; see ``qkv.notebook.export.to_html``)."""
        return display.export_html(self, path, **kwargs)


def _encode(a: np.ndarray) -> dict:
    if a.dtype == np.bool_:
        data = a.tolist()
    else:
        data = finite_or_text(a.astype(np.float64).tolist() if a.ndim else float(a))
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": data}


def finite_or_text(x):
    """Nested lists of numbers as JSON takes them: -inf, inf and nan as those strings."""
    if isinstance(x, list):
        return [finite_or_text(e) for e in x]
    return x if math.isfinite(x) else repr(x)  # 'inf', '-inf', 'nan'


def _decode(d, field_name: str, budget: list) -> np.ndarray:
    """{dtype, shape, data} -> array, every part checked (``field_name`` names it in errors)
    and the declared size counted against ``budget`` before anything is allocated."""
    if not isinstance(d, dict):
        raise ValueError(
            f"{field_name}: expected an object {{dtype, shape, data}}, got {type(d).__name__}"
        )
    dtype, shape = d.get("dtype"), d.get("shape")
    if dtype not in DTYPES:
        raise ValueError(f"{field_name}.dtype: expected one of {DTYPES}, got {dtype!r}")
    if not (
        isinstance(shape, list)
        and len(shape) <= MAX_NDIM
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        raise ValueError(
            f"{field_name}.shape: expected at most {MAX_NDIM} non-negative "
            f"integers, got {str(shape)[:100]}"
        )
    size = math.prod(shape)
    if size > budget[0]:
        raise ValueError(
            f"{field_name}.shape: {shape} holds {size} numbers, more than the "
            f"{MAX_ELEMENTS} a trace may hold"
        )
    budget[0] -= size
    leaves = _leaves(d.get("data"), shape, f"{field_name}.data")
    if dtype == "bool":
        if not all(isinstance(x, bool) for x in leaves):
            raise ValueError(f"{field_name}.data: expected true/false values")
        return np.array(leaves, dtype=bool).reshape(shape)
    try:
        numbers = [_number(x) for x in leaves]
    except (TypeError, ValueError):
        raise ValueError(f"{field_name}.data: expected numbers or 'inf', '-inf', 'nan'") from None
    return np.array(numbers, dtype=np.float64).astype(dtype).reshape(shape)


def _leaves(data, shape, field_name: str) -> list:
    """The numbers of nested lists ``data`` that must have exactly ``shape``, flattened; the
    work is bounded by the declared size."""
    level = [data]
    for depth, n in enumerate(shape):
        nxt = []
        for item in level:
            if not isinstance(item, list) or len(item) != n:
                raise ValueError(
                    f"{field_name}: expected nested lists of shape {shape}, axis "
                    f"{depth} does not hold {n} entries"
                )
            nxt.extend(item)
        level = nxt
    return level


def _number(x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, str)):
        raise TypeError(x)
    if isinstance(x, str) and x not in ("inf", "-inf", "nan"):
        raise ValueError(x)
    return float(x)


def _is_array(a) -> bool:
    return a is not None and hasattr(a, "shape")


def _same(a, b) -> bool:
    """Equal settings values or arrays (dtype, shape and values; NaN equals NaN)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        nan_ok = a.dtype.kind == "f" and b.dtype.kind == "f"
        return (
            a.dtype == b.dtype
            and a.shape == b.shape
            and bool(np.array_equal(a, b, equal_nan=nan_ok))
        )
    return a == b
