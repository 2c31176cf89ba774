"""What a lazy trace computes its steps from, and how: ``Source`` holds q, k, v, the mask rule
and the settings of one attention call and computes a step of one head for one tile of
``steps.ROWS`` queries by ``attention.traced_steps`` (the eager path's code and tiles, so the
numbers are the eager trace's bit for bit); ``TileCache`` keeps the tiles read last."""

from __future__ import annotations

import itertools
import math
import threading
from collections import OrderedDict

import numpy as np

from qkv import checks, masks
from qkv.reference import traced_steps
from qkv.steps import ROWS, kv_head, rows_matmul
from qkv.trace import to_numpy

CACHE_BYTES = 128 << 20  # bytes of tiles kept for the next read, all lazy traces together


class Source:
    """What one attention call's steps are computed from, as NumPy arrays: q (*lead, H, L, d_k),
    k (*lead, G, S, d_k), v (*lead, G, S, d_v) or None, the mask ``rule``, scale, τ, softcap,
    ``bias`` (one axis per scores axis, each of its size or 1), ``sinks`` (H,), and W_O
    (H, d_v, d_model) with b_O for head_out. ``lead`` holds the batch axes (often none)."""

    def __init__(
        self, q, k, v, rule: masks.Rule, *, scale, temperature=1.0, softcap=None, bias=None,
        sinks=None, W_O=None, b_O=None,
    ):  # fmt: skip
        self.q, self.k = to_numpy(q), to_numpy(k)
        self.v = None if v is None else to_numpy(v)
        self.lead = self.q.shape[:-3]
        self.H, self.L, self.d_k = self.q.shape[-3:]
        self.G, self.S = self.k.shape[-3], self.k.shape[-2]
        self.d_v = None if self.v is None else self.v.shape[-1]
        if rule.mask is not None:
            rule = masks.Rule(
                rule.L, rule.S, _full_ndim(rule.mask, self.q.ndim), rule.causal, rule.window
            )
        self.rule = rule
        self.scale, self.temperature, self.softcap = float(scale), float(temperature), softcap
        self.bias = None if bias is None else _full_ndim(to_numpy(bias), self.q.ndim)
        self.sinks = None if sinks is None else to_numpy(sinks).reshape(-1)
        self.W_O = None if W_O is None else to_numpy(W_O)
        self.b_O = None if b_O is None else to_numpy(b_O)
        self.cache: TileCache | Shelf = Shelf(SHARED)

    @classmethod
    def of(cls, p: checks.Problem, *, rule: masks.Rule | None = None, **kwargs) -> Source:
        """The source of a checked problem (``checks.problem``) whose q has a head axis; ``rule``
        in place of its mask and causal flag; kwargs: W_O, b_O."""
        q, k = to_numpy(p.q), to_numpy(p.k)
        v = None if p.v is None else to_numpy(p.v)
        lead = np.broadcast_shapes(*(a.shape[:-3] for a in (q, k, v) if a is not None))
        q, k = (np.broadcast_to(a, (*lead, *a.shape[-3:])) for a in (q, k))
        v = None if v is None else np.broadcast_to(v, (*lead, *v.shape[-3:]))
        if rule is None:
            mask = None if p.mask is None else to_numpy(p.mask)
            rule = masks.Rule(q.shape[-2], k.shape[-2], mask=mask, causal=p.causal)
        sinks = None if p.sinks is None else to_numpy(p.sinks).reshape(-1)
        if sinks is not None and len(sinks) == 1:
            sinks = np.repeat(sinks, q.shape[-3])
        return cls(q, k, v, rule, scale=p.scale, temperature=p.temperature,
                   softcap=p.softcap, bias=p.bias, sinks=sinks, **kwargs)  # fmt: skip

    def tiles(self, r0: int = 0, r1: int | None = None):
        """(tile number, first row, end row) of the tiles that cover rows r0..r1−1."""
        r1 = self.L if r1 is None else r1
        for t in range(r0 // ROWS, math.ceil(r1 / ROWS)):
            yield t, t * ROWS, min(self.L, (t + 1) * ROWS)

    def tile(self, index: tuple, h: int, t: int, step: str, *, keep: bool = True) -> np.ndarray:
        """Step ``step`` of query head ``h`` at leading ``index`` for the queries of tile ``t``,
        by ``traced_steps`` (with v when the step is z or head_out). The cache keeps that step
        alone, and only when ``keep`` (a reader that copies the tile into its answer passes
        False): the rest is dropped as the tile ends, so its memory serves the next tile (a
        fresh array's first touch costs about as much as computing it)."""
        found = self.cache.get((index, h, t, step))
        if found is not None:
            return found[step]
        with_v = step in ("z", "head_out")
        r0, r1 = t * ROWS, min(self.L, (t + 1) * ROWS)
        g = kv_head(h, self.H, self.G)
        at = (*index, h)
        p = checks.problem(
            self.q[(*at, slice(r0, r1))],  # (rows, d_k)
            self.k[(*index, g)],  # (S, d_k)
            self.v[(*index, g)] if with_v and self.v is not None else None,  # (S, d_v)
            mask=self.rule.block(at, r0, r1),  # (rows, S)
            scale=self.scale,
            temperature=self.temperature,
            softcap=self.softcap,
            bias=None if self.bias is None else masks.pick_rows(self.bias, at, r0, r1),
            sinks=None if self.sinks is None else self.sinks[h : h + 1],
        )
        kept, _ = traced_steps(p)
        if step == "head_out" and self.W_O is not None:  # (rows, d_v) @ (d_v, d_model)
            kept["head_out"] = rows_matmul(kept["z"], self.W_O[h])
        if keep:
            self.cache.put((index, h, t, step), {step: kept[step]})
        return kept[step]

    def arrays(self) -> dict:
        """The arrays this source holds (weights W_O, b_O excluded: they belong to the model)."""
        found = {"q": self.q, "k": self.k, "v": self.v, "mask": self.rule.mask, "bias": self.bias}
        return {n: a for n, a in found.items() if a is not None}


def _full_ndim(a: np.ndarray, ndim: int) -> np.ndarray:
    """``a`` with leading axes of size 1 added up to ``ndim`` axes."""
    a = np.asarray(a)
    return a.reshape((1,) * (ndim - a.ndim) + a.shape) if a.ndim < ndim else a


class Shelf:
    """One source's part of a shared ``TileCache``: its keys, its ``clear``."""

    _made = itertools.count()

    def __init__(self, store: TileCache):
        self.store, self.token = store, next(Shelf._made)  # never reused, unlike id()
        self.max_bytes = store.max_bytes

    def get(self, key):
        return self.store.get((self.token, key))

    def put(self, key, tile: dict) -> None:
        self.store.put((self.token, key), tile)

    def clear(self) -> None:
        self.store.drop(lambda key: key[0] == self.token)


class TileCache:
    """The tiles read last, up to ``max_bytes`` (least recently read dropped first)."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.bytes = max_bytes, 0
        self.tiles: OrderedDict = OrderedDict()
        self.lock = threading.Lock()  # a server reads tiles from several threads

    def get(self, key):
        with self.lock:
            found = self.tiles.get(key)
            if found is not None:
                self.tiles.move_to_end(key)
            return found

    def clear(self) -> None:
        """Drop every tile kept."""
        self.drop(lambda key: True)

    def drop(self, which) -> None:
        """Drop the tiles whose key ``which(key)`` holds."""
        with self.lock:
            for key in [k for k in self.tiles if which(k)]:
                self.bytes -= held_bytes(self.tiles.pop(key).values())

    def put(self, key, tile: dict) -> None:
        size = held_bytes(tile.values())
        if size > self.max_bytes:
            return
        with self.lock:
            if key in self.tiles:
                self.bytes -= held_bytes(self.tiles.pop(key).values())
            self.tiles[key] = tile
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, old = self.tiles.popitem(last=False)
                self.bytes -= held_bytes(old.values())


def held_bytes(arrays) -> int:
    """Bytes of the distinct buffers behind ``arrays`` (views of one buffer count once)."""
    seen: dict[int, int] = {}
    for a in arrays:
        if a is None or not hasattr(a, "nbytes"):
            continue
        base = a
        while getattr(base, "base", None) is not None and isinstance(base.base, np.ndarray):
            base = base.base
        seen[id(base)] = base.nbytes
    return sum(seen.values())


SHARED = TileCache(CACHE_BYTES)  # one budget for every lazy trace of the process
