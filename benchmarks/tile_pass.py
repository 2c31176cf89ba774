"""The fused kernel's compiled pass on one tile of scores, alone: nanoseconds per score for a
512 × 512 float32 tile, on the path without the running max (every score known to be small) and
on the path with it (scores 16× wider), one thread. What the compiled code costs between the two
matrix products, apart from them and from the caches (the tile stays in L2).

    taskset -c 0 env PYTHONPATH=src .venv/bin/python benchmarks/tile_pass.py [--rows 512 --keys 512]

Best of --runs calls, each on a fresh copy of the tile (the pass works in place). Not a test:
nothing asserts a time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from qkv.kernels import compiled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--keys", type=int, default=512)
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args()
    n, bk, d = args.rows, args.keys, 64
    tile = compiled.kernels()["tile"]
    rng = np.random.default_rng(0)
    m, ell = np.zeros((1, n), np.float32), np.zeros((1, n), np.float32)
    acc = np.zeros((1, n, d), np.float32)
    positions = np.arange(n, dtype=np.int64)
    no_mask, no_bias = np.ones((1, 1, 1), bool), np.zeros((1, 1, 1, 1), np.float32)

    def best_ns_per_score(scores: np.ndarray, fixed: bool) -> float:
        times = []
        for _ in range(args.runs + 1):  # the first call loads the compiled code
            s = scores.copy()
            m[:] = 0.0 if fixed else -np.inf
            ell[:], acc[:] = 0.0, 1.0
            t0 = time.perf_counter()
            tile(s, m, ell, acc, positions, 0, False, 0, no_mask, False, no_bias, False, fixed)
            times.append(time.perf_counter() - t0)
        return min(times[1:]) * 1e9 / (n * bk)

    narrow = rng.standard_normal((1, n, bk)).astype(np.float32)
    print(f"tile {n}×{bk} float32, one thread, best of {args.runs}")
    print(f"no running max (small scores)   {best_ns_per_score(narrow, True):.3f} ns a score")
    print(f"running max, N(0, 1) scores     {best_ns_per_score(narrow, False):.3f} ns a score")
    print(f"running max, 16× wider scores   {best_ns_per_score(16 * narrow, False):.3f} ns a score")


if __name__ == "__main__":
    main()
