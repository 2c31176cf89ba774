"""A decoding step: a few query rows per K/V head against a cache (``fused_attention`` sends
calls of up to ``fused.DECODE_ROWS`` rows per K/V head here, without softcap, bias or sinks).

Rows that see every key of a long cache may read K and V once each through BLAS, with the
tile pass's compiled row update in between (``kernels/decode_blas.py``: memory-bound, as fast
as the matrix-vector products themselves, which BLAS spreads over its own threads), from as
many keys as the tuner measured on this processor (``fused.DECODE``). Otherwise (a mask, a
diagonal, a short cache) one compiled loop per K/V head (``decode_jit.decode``) reads each key
and value once for all the query rows that share it, and never a masked one. A cache that is
a view into a longer buffer (a KVCache's) is read by the loop one K/V head at a time, whose
rows are contiguous, without a copy. Workers take whole K/V heads; a step too small to pay
for handing work to a thread runs on the caller's.
"""

from __future__ import annotations

import math

import numpy as np

from qkv.kernels import compiled, decode_blas, layout
from qkv.kernels.threads import default_workers, spread

PARALLEL_MIN = 1 << 21  # below this many key·feature reads (K and V), one thread


def decoding(q4, k4, v4, mask, causal, factor, *, groups, work, workers, blas_keys, kernel):
    """(z (*batch, H, L, d_v) in ``work``'s dtype, finite): attention for q4 (..., H, L, d_k),
    k4 (..., G, S, d_k), v4 (..., G, S, d_v) of the same number of axes (≥ 3), mask boolean
    broadcastable to (..., H, L, S) or None, causal None, "bottom-right" or "top-left";
    factor = scale/τ·log₂e; groups (G, r), r query heads per K/V head; workers None: by the
    size; blas_keys: from how many keys rows that see every key go through BLAS (None: as
    ``kernel``, the tuner's "decode" entry, chose). finite: whether every z is known to be
    finite (False: not known)."""
    G, r = groups
    L, S, d_k, d_v = q4.shape[-2], k4.shape[-2], q4.shape[-1], v4.shape[-1]
    nd = q4.ndim
    batch = q4.shape[:-3]
    if not batch == k4.shape[:-3] == v4.shape[:-3]:
        batch = np.broadcast_shapes(q4.shape[:-3], k4.shape[:-3], v4.shape[:-3])
    U = math.prod(batch) * G
    if U == 0:  # no heads or an empty batch: an empty output
        return np.zeros((*batch, G * r, L, d_v), dtype=work), True
    # (..., H, L, d_k) -> (U, r·L, d_k): the rows that share a K/V head, times c·log₂e
    qs = _expanded(layout.split_heads(q4, G, r), (*batch, G, r, L, d_k))
    qs = np.multiply(qs.reshape(U, r * L, d_k), factor, dtype=work, order="C")
    ks = _expanded(k4, (*batch, G, S, d_k)).reshape(U, S, d_k)  # a view when it can be
    vs = _expanded(v4, (*batch, G, S, d_v)).reshape(U, S, d_v)
    ms = compiled.NO_MASK
    if mask is not None:  # one row per unit here (r·L = 1)
        mm = layout.split_heads(layout.padded(np.asarray(mask), nd), G, r)
        ms = np.broadcast_to(mm, (*batch, G, r, L, S)).reshape(U, r * L, S)
    out = np.empty((U, r * L, d_v), dtype=work)  # every row written
    offset = S - L if causal == "bottom-right" else 0
    # each K/V head's rows contiguous (a whole array, or a cache's view: the first S rows of a
    # longer buffer): the loop reads them in place, and the tuner's choice applies
    in_rows = layout.unit_rows(ks) and layout.unit_rows(vs)
    # every row sees every key (no mask; causal hides nothing): BLAS may read K and V
    sees_all = mask is None and (causal is None or offset + 1 >= S)
    blas, workers = route(
        U, S, d_k + d_v, sees_all=sees_all, in_rows=in_rows, blas_keys=blas_keys, kernel=kernel,
        workers=workers,
    )  # fmt: skip
    # the loop's dot products vectorise on contiguous rows only: a cache's view is read one
    # unit at a time, other strides are copied
    per_unit = not blas and not (ks.flags.c_contiguous and vs.flags.c_contiguous)
    if per_unit and not in_rows:
        ks, vs, per_unit = np.ascontiguousarray(ks), np.ascontiguousarray(vs), False
    if not blas:
        ks, vs = compiled.read_only(ks), compiled.read_only(vs)
    step = -(-U // workers)
    chunks = [(u0, min(u0 + step, U)) for u0 in range(0, U, step)]
    loop = compiled.kernels()["decode"]

    def run(c) -> bool:
        """These units' rows; whether their every z is known to be finite."""
        u0, u1 = c
        if blas:  # its compiled pass tells
            return decode_blas.step(qs[u0:u1], ks[u0:u1], vs[u0:u1], out[u0:u1])
        for a0, a1 in [(a, a + 1) for a in range(u0, u1)] if per_unit else [c]:
            loop(
                qs[a0:a1],
                ks[a0:a1],
                vs[a0:a1],
                ms if mask is None else ms[a0:a1],
                mask is not None,
                L,
                causal is not None,
                offset,
                out[a0:a1],
            )
        return False  # not known: the output is looked at

    if len(chunks) <= 1:
        finite = run(chunks[0])
    else:
        finite = all(spread(run, chunks, len(chunks)))
    return out.reshape(*batch, G * r, L, d_v), finite


def route(
    units, keys, width, *, sees_all, in_rows, blas_keys, kernel, workers
) -> tuple[bool, int]:  # fmt: skip
    """(through BLAS, workers) for a decoding step of ``units`` K/V heads over ``keys`` keys,
    ``width`` = d_k + d_v: BLAS, on the calling thread (BLAS threads its own products), when
    every row sees every key (``sees_all``) of a cache of at least ``blas_keys`` keys (None: as
    ``decode_blas.blas_from`` says for rows ``in_rows``); else the loop, on the calling thread
    below PARALLEL_MIN key·feature reads and on a worker per CPU from there (``workers`` None;
    else as given)."""
    blas = sees_all and keys >= (blas_keys or decode_blas.blas_from(keys, in_rows, kernel))
    if workers is None:
        # BLAS threads its own matrix-vector products: one caller beats a worker per CPU with
        # BLAS on one thread each (two cores, 12 heads × 16,384 keys: 4.4 against 5.4 ms)
        small = units * keys * width < PARALLEL_MIN
        workers = 1 if blas or small else default_workers()
    return blas, workers


def _expanded(a, shape):
    """a broadcast to shape (a itself when it has that shape already)."""
    return a if a.shape == shape else np.broadcast_to(a, shape)
