"""Query rows per tile for the strip kernel (``kernels/strips_jit.py``): 12 heads × T keys and
queries, d = 64, float32, full attention through ``qkv.attention`` with each tile size forced
(``tuning.forced``), the sizes taking turns, best and median of --runs.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=src \\
        taskset -c 0 .venv/bin/python benchmarks/strip_rows.py [--T 4096] [--causal] [--width 4]

Not a test: nothing asserts a time. The kernel measures its own choice on first use
(``qkv bench --tune``, "strips"); ``strips_jit.STRIP_ROWS`` where nothing is measured. On the
2-core AMD EPYC (12 heads × 4,096 keys, one core, median) 1,024 rows read 80.7 GFLOP/s, 512
78.3, 256 78.2 and 128 75.8.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import qkv
from qkv.kernels import strips_jit, tuning


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--T", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--width", type=float, default=1.0, help="q and k drawn this much wider")
    args = parser.parse_args()
    H, T, d = 12, args.T, 64
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((H, T, d)).astype(np.float32) for _ in range(3))
    q, k = args.width * q, args.width * k
    rows = (*strips_jit.STRIP_ROW_CHOICES, 2 * strips_jit.STRIP_ROW_CHOICES[-1])  # and one more
    times: dict[int, list[float]] = {n: [] for n in rows}
    for n in rows:  # warm-up
        with tuning.forced(tuning.Tiles(n, 512)):
            qkv.attention(q, k, v, causal=args.causal)
    for _ in range(args.runs):
        for n in rows:
            with tuning.forced(tuning.Tiles(n, 512)):
                t0 = time.perf_counter()
                qkv.attention(q, k, v, causal=args.causal)
                times[n].append(time.perf_counter() - t0)
    flops = 4 * H * T * T * d / (2 if args.causal else 1)
    kind = "causal" if args.causal else "full"
    print(f"{H} heads, T = {T}, d = {d}, float32, {kind}, q and k {args.width}× wide")
    for n, t in times.items():
        best, median = flops / min(t) / 1e9, flops / float(np.median(t)) / 1e9
        print(f"{n:5d} rows a tile  best {best:6.1f}  median {median:6.1f} GFLOP/s")


if __name__ == "__main__":
    main()
