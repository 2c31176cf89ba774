"""Attention with the optional steps (Gemma 2's softcap, GPT-OSS's sinks, a position bias):
time of each backend, and the peak NumPy memory of the reference and the fused kernel.

    PYTHONPATH=src .venv/bin/python benchmarks/optional_steps.py [--T 2048] [--heads 8]
        [--d 64] [--runs 5]

One causal float32 call of (1, heads, T, d) inputs per backend. Each row warms up once, then
reports the median and the spread (min–max) of --runs; the spread says how noisy the machine
was. torch cannot soft-cap inside SDPA, so "torch" with softcap runs the reference in torch
(qkv.kernels.dispatch); the "sinks + bias" rows show the torch kernel itself. Peak memory is
tracemalloc's (NumPy's allocations; torch's are not counted). Not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
import tracemalloc

import numpy as np

import qkv


def timed(fn, runs):
    fn()  # warm-up (numba compiles, or loads its cache, on the first call)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), max(times)


def peak_mib(fn):
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    shape = (1, args.heads, args.T, args.d)
    q, k, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
    sinks = rng.standard_normal(args.heads).astype(np.float32)
    bias = (rng.standard_normal((args.T, args.T)) * 0.1).astype(np.float32)  # (L, S): broadcast
    import torch

    tq, tk, tv, ts, tb = map(torch.from_numpy, (q, k, v, sinks, bias))
    settings = {
        "softcap + sinks": ({"softcap": 50.0, "sinks": sinks}, {"softcap": 50.0, "sinks": ts}),
        "sinks + bias (L, S)": ({"sinks": sinks, "bias": bias}, {"sinks": ts, "bias": tb}),
    }
    print(
        f"causal float32, (1, {args.heads}, {args.T}, {args.d}); median of {args.runs} runs "
        f"(min-max), after one warm-up"
    )
    for label, (numpy_kw, torch_kw) in settings.items():
        print(f"\n{label}")
        want = qkv.attention(q, k, v, causal=True, backend="reference", **numpy_kw)
        for backend in ("reference", "blocked", "fused", "torch"):
            args_, kw = ((tq, tk, tv), torch_kw) if backend == "torch" else ((q, k, v), numpy_kw)
            call = functools.partial(qkv.attention, *args_, causal=True, backend=backend, **kw)

            err = float(np.abs(np.asarray(call()) - want).max())
            med, lo, hi = timed(call, args.runs)
            print(
                f"  {backend:9s} {med * 1e3:8.1f} ms  ({lo * 1e3:.1f}-{hi * 1e3:.1f})  "
                f"max |z - reference| {err:.1e}"
            )
        for backend in ("reference", "fused"):
            call = functools.partial(
                qkv.attention, q, k, v, causal=True, backend=backend, **numpy_kw
            )
            mib = peak_mib(call)
            print(f"  peak NumPy memory, {backend:9s} {mib:8.1f} MiB")


if __name__ == "__main__":
    main()
