"""How close the fused kernel comes to the matrix products it is made of: full attention at
T = 4096 (12 heads, d = 64, float32, one thread) by the fused kernel on BLAS's tiles
(``strips=False``, as with a mask, a bias or a softcap) and on its own products (the strip
kernel, ``kernels/strips_jit.py``), against the tiles' two BLAS matrix products alone (q·kᵀ and
p·v per tile, no softmax pass), all as a share of NumPy's float32 matrix product peak on one
thread.

    OPENBLAS_NUM_THREADS=1 taskset -c 0 env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        PYTHONPATH=src .venv/bin/python benchmarks/tile_ceiling.py [--tiles 512x1024] [--T 4096]

The gap between the first two rows is what the softmax pass between the products costs (2^x,
the row sums, the rescaling, and the score tile's trip through the caches); the first row is the
most a kernel built from these BLAS calls could reach, which the strip kernel is not bound by.
CPU time of this thread, best of --runs. Not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from qkv.kernels import fused


def best_cpu_seconds(fn, runs: int) -> float:
    fn()  # warm-up: compiled code loaded, pages touched
    times = []
    for _ in range(runs):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--T", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--tiles", default="512x1024", help="block_q x block_k")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    bq, bk = (int(n) for n in args.tiles.split("x"))
    T, H, d = args.T, args.heads, args.d
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((H, T, d), dtype=np.float32) for _ in range(3))
    s = np.empty((1, bq, bk), np.float32)
    pv = np.empty((1, bq, d), np.float32)
    acc = np.zeros((1, bq, d), np.float32)

    def products_alone():
        for h in range(H):
            for i0 in range(0, T, bq):
                qi = q[h : h + 1, i0 : i0 + bq]
                for j0 in range(0, T, bk):
                    s_ = s[:, : qi.shape[1], : min(bk, T - j0)]
                    np.matmul(qi, k[h : h + 1, j0 : j0 + bk].transpose(0, 2, 1), out=s_)
                    np.matmul(s_, v[h : h + 1, j0 : j0 + bk], out=pv[:, : qi.shape[1]])
                    acc[:, : qi.shape[1]] += pv[:, : qi.shape[1]]

    def on_blas():
        fused.fused_attention(
            q, k, v, scale=d**-0.5, workers=1, block_q=bq, block_k=bk, strips=False
        )

    def on_strips():
        fused.fused_attention(q, k, v, scale=d**-0.5, workers=1)

    a = np.ones((2048, 2048), np.float32)
    out = np.empty_like(a)
    peak = 2 * 2048**3 / best_cpu_seconds(lambda: np.matmul(a, a, out=out), 2 * args.runs)
    flops = 4 * T * T * d * H
    print(f"T={T} heads={H} d={d} float32, tiles {bq}×{bk}, one thread")
    print(f"matrix product peak            {peak / 1e9:6.1f} GFLOP/s")
    rows = (
        ("the tiles' products alone", products_alone),
        ("fused kernel on BLAS's tiles", on_blas),
        ("fused kernel on its strips", on_strips),
    )
    for name, fn in rows:
        rate = flops / best_cpu_seconds(fn, args.runs)
        print(f"{name:<30} {rate / 1e9:6.1f} GFLOP/s  {100 * rate / peak:3.0f}% of peak")


if __name__ == "__main__":
    main()
