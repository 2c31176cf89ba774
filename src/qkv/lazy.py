"""Lazy traces: keep what the steps are computed from; compute a step of a head when it is read.

A ``LazyTrace`` holds q, k, v (and x, out, … as the model gave them), the settings and the mask
as a ``masks.Rule``. Reading ``trace["weights"]``, ``trace.head(h)["weights"]`` or a reader
(``rows``, ``block``, ``top_keys``, ``head_stats``, ``pooled``) runs ``attention.traced_steps``
on tiles of ``steps.ROWS`` queries of one head: the code and the tiles of the eager path, so
every number equals the eager trace's bit for bit. A bounded cache keeps the tiles read last.

Memory: the arrays held (``nbytes``), plus one tile per step while a read runs. A read of a whole
step past ``budget`` bytes is refused with the size and the readers that need less.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from qkv import checks, masks
from qkv.kernels import dispatch
from qkv.steps import kv_head
from qkv.tiles import Source, held_bytes
from qkv.trace import STEPS, Trace

BUDGET = 512 << 20  # bytes a read of one whole step may return


class LazyTrace(Trace):
    """A ``Trace`` whose steps are computed when read (see the module docstring).

    ``source``: a ``Source``; ``stored``: arrays kept as they came (x, out, rope …);
    ``extra``: settings to show beside the computed ones (rope_base …); ``head``: this trace is
    that one query head of the source, without a head axis (``trace.head(h)``)."""

    def __init__(
        self, source: Source, *, stored=None, extra=None, tokens=None, key_tokens=None,
        head: int | None = None, budget: int | None = None,
    ):  # fmt: skip
        self.source, self.head_index = source, head
        self.budget = BUDGET if budget is None else budget  # BUDGET as it is now
        self.stored = {n: a for n, a in (stored or {}).items() if a is not None}
        self.extra = dict(extra or {})
        self.tokens, self.key_tokens = tokens, key_tokens
        self.steps = _Steps(self)
        self.settings = _Settings(self)

    def __repr__(self) -> str:
        s = self.source
        where = f"head {self.head_index} of " if self.head_index is not None else ""
        return (
            f"<LazyTrace {where}{s.H} heads (K/V {s.G}), L {s.L}, S {s.S}, d_k {s.d_k}; "
            f"holds {self.nbytes:,} bytes>"
        )

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays this trace holds."""
        return held_bytes([*self.source.arrays().values(), *self.stored.values()])

    def numpy(self) -> LazyTrace:
        return self  # its arrays are NumPy arrays already

    def eager(self) -> Trace:
        """Every step computed now, as a plain ``Trace`` (within ``budget`` per step)."""
        mask = self.settings["mask"]
        return Trace({n: self[n] for n in self.names}, {**self.settings, "mask": mask},
                     self.tokens, self.key_tokens)  # fmt: skip

    def head(self, h: int) -> LazyTrace:
        """Query head ``h`` as a trace without a head axis (its K/V head chosen by group)."""
        s = self.source
        if self.head_index is not None:
            raise ValueError("this trace is one head already")
        if s.lead:
            raise ValueError(f"this trace has leading axes {s.lead}: take one sequence first")
        if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or not 0 <= h < s.H:
            raise IndexError(f"head must be in [0, {s.H}), got {h!r}")
        stored = {"x": self.stored["x"]} if "x" in self.stored else {}
        return LazyTrace(s, stored=stored, extra=self.extra, tokens=self.tokens,
                         key_tokens=self.key_tokens, head=int(h), budget=self.budget)  # fmt: skip

    def sequence(self, b: int, keep=None, *, tokens=None, key_tokens=None) -> LazyTrace:
        """Sequence ``b`` of a batched trace; with ``keep`` (increasing positions, for
        self-attention) only those queries and keys: padding dropped. Arrays are views when
        ``keep`` is one run of positions."""
        s = self.source
        if len(s.lead) != 1:
            raise ValueError(f"sequence() takes a trace with one batch axis, got {s.lead}")
        pick = _positions(keep)
        rule = s.rule.take(b, keep) if keep is not None else _rule_at(s.rule, b)
        cut = (lambda a: a[b]) if keep is None else (lambda a: a[b][..., pick, :])
        stored = {n: cut(a) for n, a in self.stored.items()}
        bias = None
        if s.bias is not None:
            bias = s.bias[b if s.bias.shape[0] > 1 else 0]
            if keep is not None:
                bias = bias[..., pick, :] if bias.shape[-2] > 1 else bias
                bias = bias[..., pick] if bias.shape[-1] > 1 else bias
        src = Source(cut(s.q), cut(s.k), None if s.v is None else cut(s.v), rule,
                     scale=s.scale, temperature=s.temperature, softcap=s.softcap, bias=bias,
                     sinks=s.sinks, W_O=s.W_O, b_O=s.b_O)  # fmt: skip
        return LazyTrace(src, stored=stored, extra=self.extra, tokens=tokens,
                         key_tokens=key_tokens, budget=self.budget)  # fmt: skip

    # ---- reading ---------------------------------------------------------------------------

    def _names(self) -> list[str]:
        s, one = self.source, self.head_index is not None
        have = {"q", "k", "scores", "scaled", "tempered", "masked", "weights"}
        have |= {n for n in self.stored if not (one and n != "x")}
        if s.v is not None:
            have |= {"v", "z"} | ({"head_out"} if s.W_O is not None else set())
        have |= {"capped"} if s.softcap is not None else set()
        have |= {"biased"} if s.bias is not None else set()
        have |= {"sink"} if s.sinks is not None else set()
        return [n for n in STEPS if n in have]

    def _read(self, name: str):
        s, h = self.source, self.head_index
        if name in self.stored:
            return self.stored[name]
        if name in ("q", "k", "v"):
            a = getattr(s, name)
            return a if h is None else a[h if name == "q" else kv_head(h, s.H, s.G)]
        return self._whole(name)

    def _whole(self, name: str) -> np.ndarray:
        """Step ``name`` of every head (or of this trace's head), tile by tile (the tiles are
        copied into the answer, not kept: the caller holds them now)."""
        s = self.source
        heads = range(s.H) if self.head_index is None else [self.head_index]
        last = {"sink": 1, "z": s.d_v, "head_out": None if s.W_O is None else s.W_O.shape[-1]}
        shape = (
            *s.lead,
            *(() if self.head_index is not None else (s.H,)),
            s.L,
            last.get(name, s.S),
        )
        itemsize = max(np.dtype(s.q.dtype).itemsize, 4)
        size = math.prod(shape) * itemsize
        if size > self.budget:
            raise ValueError(_too_big(name, shape, size, self.budget, self.head_index is None))
        out = None
        for index in np.ndindex(*s.lead):
            for at, h in enumerate(heads):
                for t, r0, r1 in s.tiles():
                    part = s.tile(index, h, t, name, keep=False)  # copied into out
                    if out is None:
                        out = np.empty(shape, dtype=part.dtype)
                    where = index if self.head_index is not None else (*index, at)
                    out[(*where, slice(r0, r1))] = part
        return out if out is not None else np.empty(shape, dtype=np.result_type(s.q, np.float32))

    def _rows(self, name: str, head, r0: int, r1: int) -> np.ndarray:
        """Rows r0..r1−1 of step ``name`` of query head ``head`` (this trace's own head when it
        is one): (r1 − r0, S) for the score steps, (…, 1) sink, (…, d_v) z, (…, d_model)
        head_out."""
        s = self.source
        if s.lead:
            raise ValueError(f"readers take one sequence; this trace has leading axes {s.lead}: "
                             "use trace.sequence(b)")  # fmt: skip
        h = self._head_of(head)
        if name in self.stored or name in ("q", "k", "v"):
            a = self._read(name)
            if self.head_index is None and name in ("q", "k", "v"):
                a = a[h if name == "q" else kv_head(h, s.H, s.G)]
            return a[r0:r1]
        parts = [
            s.tile((), h, t, name)[max(r0, a) - a : min(r1, b) - a] for t, a, b in s.tiles(r0, r1)
        ]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _head_of(self, head) -> int:
        if self.head_index is None:
            h = super()._head_of(head)
            assert h is not None  # a lazy trace without head_index keeps its head axis
            return h
        if head is not None and head != self.head_index:
            raise ValueError(f"this trace is head {self.head_index}; read it without head=")
        return self.head_index

    def contributions(self, i: int, *, head: int | None = None) -> np.ndarray:
        """The per-key terms w_ij·v_j of query i (see ``Trace.contributions``), from one row."""
        s = self.source
        if s.v is None:
            raise KeyError(f"step 'v' is not in this trace; it has {list(self.steps)}")
        if not -s.L <= i < s.L:
            raise IndexError(f"query index must be in [0, {s.L}), got {i}")
        i %= s.L
        if self.head_index is not None or head is not None:
            h = self._head_of(head)
            w = self._rows("weights", h, i, i + 1)[0]  # (S,)
            return w[:, None] * s.v[kv_head(h, s.H, s.G)]  # (S, 1) * (S, d_v)
        w = np.stack([self._rows("weights", h, i, i + 1)[0] for h in range(s.H)])  # (H, S)
        v = s.v[[kv_head(h, s.H, s.G) for h in range(s.H)]]  # (H, S, d_v)
        return w[..., None] * v


def _positions(keep):
    """``keep`` as a slice when it is one run of positions (so arrays cut to it are views)."""
    if keep is None:
        return slice(None)
    keep = np.asarray(keep)
    if len(keep) and keep[-1] - keep[0] + 1 == len(keep):
        return slice(int(keep[0]), int(keep[-1]) + 1)
    return keep


def _rule_at(rule: masks.Rule, b: int) -> masks.Rule:
    """The rule of sequence ``b``, every position kept."""
    mask = None if rule.mask is None else rule.mask[b if rule.mask.shape[0] > 1 else 0]
    return masks.Rule(rule.L, rule.S, mask=mask, causal=rule.causal, window=rule.window)


def _too_big(name, shape, size, budget, all_heads) -> str:
    what = f"trace[{name!r}]" if all_heads else f"this head's {name!r}"
    return (
        f"{what} would hold {size / 1e6:,.0f} MB ({' × '.join(map(str, shape))} numbers), "
        f"more than the {budget / 1e6:,.0f} MB a whole-step read may take (trace.budget); "
        "read less: trace.head(h)[name], trace.rows(rows, head=h), trace.block(rows, keys, "
        "head=h), trace.top_keys(k, head=h), trace.head_stats(h) or trace.pooled(256, head=h)"
    )


class _Steps(Mapping):
    """A lazy trace's steps by name: each computed when read."""

    def __init__(self, trace: LazyTrace):
        self.trace = trace

    def __getitem__(self, name: str):
        if name not in self.trace._names():
            raise KeyError(name)
        return self.trace._read(name)

    def __iter__(self):
        return iter(self.trace._names())

    def __len__(self) -> int:
        return len(self.trace._names())

    def __contains__(self, name) -> bool:
        return name in self.trace._names()


class _Settings(Mapping):
    """A lazy trace's settings; "mask" is the rule's whole mask, built when read."""

    def __init__(self, trace: LazyTrace):
        self.trace = trace

    def _values(self) -> dict:
        t, s = self.trace, self.trace.source
        one = t.head_index is not None
        values = {
            "scale": s.scale,
            "temperature": s.temperature,
            "causal": s.rule.causal,
            "L": s.L,
            "S": s.S,
            "d_k": s.d_k,
            "d_v": s.d_v,
            "n_heads": None if one else s.H,
            "n_kv_heads": None if one else s.G,
        }
        if s.rule.window is not None:
            values["window"] = s.rule.window
        if s.softcap is not None:
            values["softcap"] = s.softcap
        if s.sinks is not None:
            sinks = [float(x) for x in s.sinks]
            values["sinks"] = [sinks[t.head_index]] if t.head_index is not None else sinks
        return {**values, **t.extra}

    def _mask(self):
        t, s = self.trace, self.trace.source
        mask = s.rule.dense()
        if mask is None:
            return None
        if t.head_index is not None:  # (H or 1, L, S) -> (L, S)
            return np.ascontiguousarray(np.broadcast_to(mask, (s.H, s.L, s.S))[t.head_index])
        if not s.lead and mask.ndim == 3 and mask.shape[0] == 1:
            return mask[0]  # the same for every head: one (L, S) mask
        return mask

    def __getitem__(self, name: str):
        if name == "mask":
            return self._mask()
        return self._values()[name]

    def __repr__(self) -> str:
        rule = self.trace.source.rule
        mask = "none" if rule.mask is None else f"array {rule.mask.shape}"
        return f"{self._values()} mask: causal {rule.causal}, window {rule.window}, mask {mask}"

    def __iter__(self):
        return iter([*self._values(), "mask"])

    def __len__(self) -> int:
        return len(self._values()) + 1


def lazy_attention(
    q, k, v, *, W_O=None, b_O=None, stored=None, extra=None, backend="auto", **kwargs
):
    """``qkv.attention(q, k, v, **kwargs)`` by the fast kernels, and a ``LazyTrace`` of it:
    returns (z, trace). q needs a head axis (..., H, L, d_k); ``W_O`` (H, d_v, d_model) and
    ``b_O`` let the trace compute head_out; ``stored`` (x, out …) and ``extra`` settings go
    into the trace as they are."""
    p = checks.problem(q, k, v, **kwargs)
    if p.q.ndim < 3:
        raise ValueError(f"a lazy trace needs q with a head axis (..., H, L, d_k), got {p.q.shape}")
    z, _ = dispatch.compute(p, backend)
    return z, LazyTrace(Source.of(p, W_O=W_O, b_O=b_O), stored=stored, extra=extra)
