"""What a view asks a trace for, at the size it draws: rows, a block, each query's top keys,
per-head statistics and a max-pooled overview of one head.

Every ``Trace`` has these readers (``Trace`` inherits ``Readers``); they read ``steps.ROWS``
queries at a time through ``trace._rows(step, head, r0, r1)``, so on a ``LazyTrace`` none of
them holds more than one tile of (ROWS, S) numbers besides its answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from qkv.checks import positive_int
from qkv.steps import ROWS, STEPS, entropy

# Steps whose axis -2 runs over the queries (k, v and rope's run over the keys; out has no head).
ROW_STEPS = tuple(name for name in STEPS if name not in ("k", "v", "rope", "out"))
STATS = ("entropy", "max", "first", "previous", "self", "next", "last")


class TopKeys(NamedTuple):
    """Each query's k heaviest keys: ``keys`` (rows, k) positions, ``weights`` (rows, k), the
    heaviest first (a tie goes to the earlier key)."""

    keys: np.ndarray
    weights: np.ndarray


class Pooled(NamedTuple):
    """A step of one head max-pooled to at most size × size cells: ``values[i, j]`` is the
    largest number among queries ``rows[i]``…``rows[i+1]``−1 and keys ``keys[j]``…``keys[j+1]``−1
    (so one sharp weight stays visible)."""

    values: np.ndarray
    rows: np.ndarray  # (R + 1,) row edges
    keys: np.ndarray  # (K + 1,) key edges


class Readers:
    """Readers shared by every trace; they need ``steps``, ``settings`` and ``_rows``."""

    steps: Mapping[str, Any]
    settings: Mapping[str, Any]

    def _rows(self, name: str, head, r0: int, r1: int) -> np.ndarray:
        raise NotImplementedError

    def _head_of(self, head) -> int | None:
        """The query head a reader reads: ``head`` on a trace with a head axis (required),
        None on a trace without one."""
        n = self.settings.get("n_heads")
        if not n:
            if head is not None:
                raise ValueError(f"this trace has no head axis; read it without head=, got {head}")
            return None
        if head is None:
            raise ValueError(f"this trace has {n} heads: pass head= (0 … {n - 1})")
        if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not 0 <= head < n:
            raise IndexError(f"head must be in [0, {n}), got {head!r}")
        return int(head)

    def _query_positions(self, rows) -> np.ndarray:
        """``rows`` (an int, a slice, a sequence of ints, or None for every query) as an
        array of query positions, checked."""
        L = self.settings["L"]
        if rows is None:
            return np.arange(L)
        if isinstance(rows, slice):
            return np.arange(L)[rows]
        idx = np.asarray(rows)
        if idx.dtype.kind not in "iu" or idx.ndim > 1:
            raise TypeError(f"rows must be an int, a slice or a sequence of ints, got {rows!r}")
        if idx.size and (idx.min() < -L or idx.max() >= L):
            raise IndexError(f"rows must be in [0, {L}), got {rows!r}")
        return np.atleast_1d(idx % L if idx.size else idx)

    def _gather(self, name: str, head, idx: np.ndarray) -> np.ndarray:
        """Rows ``idx`` of step ``name``, read a tile at a time."""
        if name not in ROW_STEPS:
            raise ValueError(f"rows are read from the steps {ROW_STEPS}, got {name!r}")
        if name not in self.steps:
            raise KeyError(f"step {name!r} is not in this trace; it has {list(self.steps)}")
        out = None
        for t in np.unique(idx // ROWS):
            r0, r1 = t * ROWS, min(self.settings["L"], (t + 1) * ROWS)
            part = self._rows(name, head, r0, r1)
            if out is None:
                out = np.empty((len(idx), *part.shape[1:]), dtype=part.dtype)
            inside = (idx >= r0) & (idx < r1)
            out[inside] = part[idx[inside] - r0]
        if out is None:  # no rows asked for
            return self._rows(name, head, 0, 0)
        return out

    def rows(self, rows, *, head: int | None = None, step: str = "weights") -> np.ndarray:
        """Rows of a step of one query head: ``rows`` an int (-> (S,)), a slice or a sequence
        of ints (-> (len, S)); ``head`` on a trace with heads."""
        h = self._head_of(head)
        got = self._gather(step, h, self._query_positions(rows))
        return got[0] if isinstance(rows, (int, np.integer)) else got

    def block(self, rows, keys, *, head: int | None = None, step: str = "weights") -> np.ndarray:
        """rows × keys of a step of one query head (each an int, a slice or a sequence)."""
        got = self.rows(rows, head=head, step=step)
        return got[..., keys]

    def top_keys(self, k: int = 5, *, head: int | None = None, rows=None) -> TopKeys:
        """Each query's k heaviest keys (of ``rows``; every query by default) for one head."""
        positive_int("k", k)
        h = self._head_of(head)
        idx = self._query_positions(rows)
        k = min(int(k), self.settings["S"])
        keys = np.empty((len(idx), k), dtype=np.int64)
        weights = np.empty((len(idx), k), dtype=np.float64)
        for lo in range(0, len(idx), ROWS):
            w = self._gather("weights", h, idx[lo : lo + ROWS])  # (rows, S)
            ranked = np.where(np.isnan(w), -np.inf, w)  # a NaN row ranks its keys by position
            kth = -np.partition(-ranked, k - 1, axis=-1)[:, k - 1 : k]  # (rows, 1)
            above, tied = ranked > kth, ranked == kth
            room = k - above.sum(axis=-1, keepdims=True)  # ties taken, the earliest first
            chosen = above | tied & (np.cumsum(tied, axis=-1) <= room)  # k per row
            cand = np.argsort(~chosen, axis=-1, kind="stable")[:, :k]  # (rows, k) by position
            vals = np.take_along_axis(ranked, cand, axis=-1)
            order = np.lexsort((cand, -vals), axis=-1)  # heaviest first, then the earlier key
            keys[lo : lo + ROWS] = np.take_along_axis(cand, order, axis=-1)
            weights[lo : lo + ROWS] = np.take_along_axis(w, keys[lo : lo + ROWS], axis=-1)
        return TopKeys(keys, weights)

    def head_stats(self, head: int | None = None) -> dict[str, np.ndarray]:
        """Per query of one head (L,), or of every head (n_heads, L) when ``head`` is None on a
        trace with heads: ``entropy`` (nats), ``max`` weight, the weight on the ``first`` key,
        on the ``previous`` token, on the query's ``self``, the ``next`` token and the ``last``
        key (NaN where that key does not exist). Queries are the last L of the S positions."""
        n = self.settings.get("n_heads")
        if n and head is None:
            per = [self.head_stats(h) for h in range(n)]
            return {name: np.stack([p[name] for p in per]) for name in STATS}
        h = self._head_of(head)
        L, S = self.settings["L"], self.settings["S"]
        out = {name: np.full(L, np.nan) for name in STATS}
        for r0 in range(0, L, ROWS):
            r1 = min(L, r0 + ROWS)
            w = self._rows("weights", h, r0, r1)  # (rows, S)
            rows = np.arange(r1 - r0)
            pos = np.arange(r0, r1) + (S - L)  # each query's position among the keys
            out["entropy"][r0:r1] = entropy(w)
            out["max"][r0:r1] = w.max(axis=-1) if S else np.nan
            for name, key in (("first", 0), ("last", S - 1)):
                if S:
                    out[name][r0:r1] = w[:, key]
            for name, step in (("previous", -1), ("self", 0), ("next", 1)):
                j = pos + step
                ok = (j >= 0) & (j < S)
                out[name][r0:r1][ok] = w[rows[ok], j[ok]]
        return out

    def pooled(self, size: int = 256, *, head: int | None = None, step: str = "weights") -> Pooled:
        """One head's step max-pooled, tile by tile, to at most ``size`` × ``size`` cells."""
        positive_int("size", size)
        h = self._head_of(head)
        L, S = self.settings["L"], self.settings["S"]
        fr, fk = max(1, math.ceil(L / size)), max(1, math.ceil(S / size))
        row_edges = np.append(np.arange(0, L, fr), L)
        key_edges = np.append(np.arange(0, S, fk), S)
        out = np.full((len(row_edges) - 1, len(key_edges) - 1), -np.inf)
        for r0 in range(0, L, ROWS):
            r1 = min(L, r0 + ROWS)
            part = np.asarray(self._rows(step, h, r0, r1), dtype=np.float64)  # (rows, S)
            part = np.maximum.reduceat(part, key_edges[:-1], axis=1) if S else part
            starts = np.unique(np.append(np.arange(r0 - r0 % fr, r1, fr).clip(r0), r0))
            bins = starts // fr
            np.maximum.at(out, bins, np.maximum.reduceat(part, starts - r0, axis=0))
        return Pooled(out, row_edges, key_edges)
