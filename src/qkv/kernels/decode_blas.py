"""A decoding step through BLAS: query rows that see every key of a long cache
(``kernels/decode.py`` sends them here, from DECODE_BLAS_KEYS keys, or from as many as
``blas_from`` measured on this processor). Scores by BLAS, the fused kernel's compiled row update on them, p·v by BLAS:
K and V read once each, at BLAS's speed, in one compiled call that calls NumPy's BLAS itself
(``kernels/decode_jit.py``); through NumPy's matmul where that BLAS cannot be reached."""

from __future__ import annotations

import time

import numpy as np

from qkv.blas import single_threaded_blas
from qkv.kernels import compiled, tuning

BLOCK = 16384  # keys per matmul through NumPy (4,096: 9% slower at 16,384 keys)
DECODE_BLAS_KEYS = 512  # built in: from this many keys, BLAS instead of the compiled decode loop
DECODE_LOOP_KEYS = 1 << 16  # the tuner's other choice: the loop up to here


# the tuner's choices for a cache whose every K/V head's rows are contiguous (a whole array or a
# KVCache's view; ``fused.DECODE``): BLAS from DECODE_BLAS_KEYS keys,
# or the fused kernel's compiled loop up to DECODE_LOOP_KEYS (which is faster depends on the
# processor)
CHOICES = (tuning.Tiles(1, DECODE_BLAS_KEYS), tuning.Tiles(1, DECODE_LOOP_KEYS))
STEPS = "16 one-token steps, H=12, 4096 keys, d=64 float32, 1 thread, CPU time"


def steps_timer(run):
    """A function of the tiles: CPU seconds of ``STEPS`` by ``run`` (the fused kernel) through
    BLAS from t.block_k keys (its decode loop below), on one contiguous cache made once; BLAS on
    this thread alone, so that its CPU time is all counted."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((12, 1, 64), dtype=np.float32)
    k, v = (rng.standard_normal((12, 4096, 64), dtype=np.float32) for _ in range(2))

    def timed(t: tuning.Tiles) -> float:
        with single_threaded_blas():
            t0 = time.thread_time()
            for _ in range(16):
                run(q, k, v, causal="bottom-right", scale=0.125, workers=1, blas_keys=t.block_k)
            return time.thread_time() - t0

    return timed


def describe(t: tuning.Tiles) -> str:
    """A choice in words: the loop, or BLAS from t.block_k keys."""
    if t.block_k >= DECODE_LOOP_KEYS:
        return f"the loop (up to {DECODE_LOOP_KEYS - 1:,} keys)"
    return f"BLAS from {t.block_k:,} keys"


def blas_from(keys: int, in_rows: bool, kernel: tuning.Kernel) -> int:
    """Keys from which a decoding step whose rows see every key of a cache of ``keys`` keys
    reads K and V through BLAS: measured on this processor (``kernel``'s choice) for a cache of
    DECODE_BLAS_KEYS keys or more whose every unit's rows are contiguous (``in_rows``: a whole
    array, or a view into a longer buffer, which the loop reads one unit at a time);
    DECODE_BLAS_KEYS otherwise (tuning off, a short cache, rows the loop would copy). Forced
    tiles (``tuning.forced``) are for the tile kernels and do not apply here."""
    if keys < DECODE_BLAS_KEYS or not tuning.enabled() or not in_rows:
        return DECODE_BLAS_KEYS
    return tuning.choice(kernel).tiles.block_k


def step(qs, ks, vs, out):
    """Decoding rows that see every key: scores by BLAS, the tile pass's row update on them,
    p·v by BLAS (K and V read once each, at BLAS's speed). qs (u, n, d_k) in log₂ units, ks
    (u, S, d_k), vs (u, S, d_v), out (u, n, d_v) written (its contents unread). Returns whether
    every z is finite; when some row's answer is undefined (a +inf score, no weight) every row
    gets NaN, and the reference then decides.

    One compiled call that calls NumPy's BLAS itself (``kernels/decode_jit.py``) where it can;
    else NumPy's matmul a block of keys at a time, with the same compiled passes between."""
    kernels = compiled.kernels()
    size = qs.itemsize
    found = kernels["blas"](qs.dtype)
    if (
        found is not None
        and ks.strides[2] == vs.strides[2] == size  # rows of unit stride, as BLAS reads them
        and ks.strides[1] >= ks.shape[2] * size > 0
        and vs.strides[1] >= vs.shape[2] * size > 0
    ):
        scratch = np.empty((qs.shape[1], ks.shape[1]), dtype=qs.dtype)
        status = kernels["decode_step"](*found, qs, ks, vs, out, scratch)
    else:
        status = _through_numpy(qs, ks, vs, out)
    if status in (1, 2):
        out[:] = np.nan
    return status == 0


def _through_numpy(qs, ks, vs, out):
    """``step`` through NumPy's matmul, a block of keys at a time; returns
    ``fused_jit.finish``'s status."""
    u, n, _ = qs.shape
    kernels = compiled.kernels()
    tile = kernels["tile"]
    m = np.full((u, n), -np.inf, dtype=qs.dtype)
    ell = np.zeros((u, n), dtype=qs.dtype)
    block = min(ks.shape[1], BLOCK)
    scores = np.empty(u * n * block, dtype=qs.dtype)
    no_bias = compiled.NO_BIAS[qs.dtype]
    for j0 in range(0, ks.shape[1], block):
        kb, vb = ks[:, j0 : j0 + block], vs[:, j0 : j0 + block]
        s = scores[: u * n * kb.shape[1]].reshape(u, n, kb.shape[1])  # C-contiguous
        np.matmul(qs, kb.transpose(0, 2, 1), out=s)  # (u, n, d_k) @ (u, d_k, b) -> (u, n, b)
        tile(
            s,
            m,
            ell,
            out,
            compiled.NO_POSITIONS,
            j0,
            False,
            0,
            compiled.NO_MASK,
            False,
            no_bias,
            False,
            False,
        )
        if j0 == 0:  # the first block's p·v starts a (whatever out held)
            np.matmul(s, vb, out=out)  # (u, n, b) @ (u, b, d_v)
        else:
            out += np.matmul(s, vb)
    # z = a / ℓ in place (1: a +inf score; 2: a row with no weight, which sees every key here;
    # 3: a z that is not finite, from a NaN or ±inf input)
    return kernels["finish"](m, ell, out, out[:, None])
