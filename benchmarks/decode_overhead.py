"""What a decoding step costs above its two matrix products: one query per head against a cache
of T keys (12 heads, d = 64, float32), timed by ``qkv bench``'s own loop (a pause, an untimed
call, a timed call: each timed step finds the caches as the previous step left them), for

    products alone   s = q·Kᵀ and s·V by NumPy's BLAS, nothing in between
    naive numpy      the bench's naive peer: the products with NumPy's softmax between them
    decode_blas.step the fused kernel's decoding step on prepared inputs
    fused_attention  the kernel called directly (its own preparation included)
    qkv.attention    the whole call: checks, dispatch, kernel

    taskset -c 0 env OPENBLAS_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python \\
        benchmarks/decode_overhead.py [--T 4096] [--min-time 5]

Medians, and each one's excess over the products alone. Not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse

import numpy as np

from qkv import attention
from qkv.bench import peers
from qkv.kernels import decode_blas, fused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--T", type=int, default=4096)
    parser.add_argument("--min-time", type=float, default=5.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    q = rng.standard_normal((12, 1, 64), dtype=np.float32)
    k = rng.standard_normal((12, args.T, 64), dtype=np.float32)
    v = rng.standard_normal((12, args.T, 64), dtype=np.float32)
    qs = q * np.float32(fused.LOG2E / 8)  # 1/√64 and log₂e, as the kernel prepares q

    def blas_step():
        out = np.empty((12, 1, 64), np.float32)
        decode_blas.step(qs, k, v, out)
        return out

    runners = {
        "products alone": lambda: np.matmul(np.matmul(qs, k.transpose(0, 2, 1)), v),
        "naive numpy": lambda: peers._naive(q, k, v, False),
        "decode_blas.step": blas_step,
        "fused_attention": lambda: fused.fused_attention(q, k, v, causal="bottom-right"),
        "qkv.attention": lambda: attention(q, k, v, causal=True),
    }
    medians, _, _ = peers.time_peers(runners, min_time=args.min_time, max_repeats=100)
    base = medians["products alone"]
    print(f"12 heads × {args.T} keys, d = 64, float32: median, and above the products alone")
    for name, t in medians.items():
        print(f"{name:16s} {t * 1e3:7.3f} ms  +{(t - base) * 1e6:5.0f} µs")


if __name__ == "__main__":
    main()
