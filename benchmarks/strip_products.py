"""The fused kernel's two matrix products alone (s = q·kᵀ, then s·v; no softmax between them),
one head of T keys and T queries, d = 64, float32, one thread, in the same run:

    blas tiles   NumPy's matmul (BLAS) on 256 × 1024 tiles, as the fused kernel's tile path
    strips       qkv's own products (kernels/strips_jit.py): strips of MR rows, blocks of
                 STRIP_KEYS keys, K packed once

and the NumPy float32 GEMM peak of the same thread (a 2048³ matmul). GFLOP/s count 4·T²·d.

    taskset -c 0 env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \\
        PYTHONPATH=src .venv/bin/python benchmarks/strip_products.py [--T 4096]

Best of --runs, the runners taking turns (so that a slow spell of the machine slows each).
Not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from qkv.kernels import strips_jit
from qkv.kernels.strips_jit import MR, NW, STRIP_KEYS, _accumulate, _scores


@numba.njit(nogil=True, cache=False)
def products(q, kp, v, acc):
    """acc = (q·kᵀ)·v a strip at a time, as ``strips_jit.strips`` runs it minus the pass."""
    n, d = q.shape
    S, d_v = v.shape
    ldv = v.strides[0] // v.itemsize
    scores = np.empty(MR * STRIP_KEYS, q.dtype)
    for j0 in range(0, S, STRIP_KEYS):
        w = min(STRIP_KEYS, S - j0)
        for i0 in range(0, n - n % MR, MR):
            for j in range(0, w - w % NW, NW):
                _scores(q[i0 : i0 + MR], d, kp, (j0 + j) * d, scores, j, w)
            for c in range(0, d_v, NW):
                _accumulate(scores, w, v, j0 * ldv + c, ldv, w, acc, i0 * d_v + c, d_v)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--T", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    T, d, bq, bk = args.T, 64, 256, 1024
    rng = np.random.default_rng(0)
    q, k, v = (0.1 * rng.standard_normal((T, d)).astype(np.float32) for _ in range(3))
    kp = np.empty(strips_jit.packed_size(T, d), np.float32)
    s, pv = np.empty((bq, bk), np.float32), np.empty((bq, d), np.float32)
    acc = np.zeros((T, d), np.float32)

    def blas_tiles():
        for i0 in range(0, T, bq):
            for j0 in range(0, T, bk):
                np.matmul(q[i0 : i0 + bq], k[j0 : j0 + bk].T, out=s[: min(bq, T - i0)])
                np.matmul(s[: min(bq, T - i0)], v[j0 : j0 + bk], out=pv[: min(bq, T - i0)])

    def strips():
        strips_jit.pack(k, kp)
        products(q, kp, v, acc)

    a = rng.standard_normal((2048, 2048)).astype(np.float32)
    runners = {"blas tiles": blas_tiles, "strips": strips, "peak": lambda: a @ a}
    flops = {"blas tiles": 4 * T * T * d, "strips": 4 * T * T * d, "peak": 2 * 2048**3}
    best = dict.fromkeys(runners, np.inf)
    for f in runners.values():
        f()
    for _ in range(args.runs):
        for name, f in runners.items():
            t0 = time.perf_counter()
            f()
            best[name] = min(best[name], time.perf_counter() - t0)
    print(f"T = {T}, d = {d}, float32, one thread, best of {args.runs}")
    for name, t in best.items():
        rate = flops[name] / t / 1e9
        share = (
            "" if name == "peak" else f"  {rate / (flops['peak'] / best['peak'] / 1e9):.0%} of peak"
        )
        print(f"{name:11s} {t * 1e3:8.2f} ms  {rate:6.1f} GFLOP/s{share}")


if __name__ == "__main__":
    main()
