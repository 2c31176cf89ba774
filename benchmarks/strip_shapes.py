"""The strip kernel's register tile on this processor: MR query rows × NR vectors of W keys
(``kernels/strips_jit.py``), each shape in a child process of its own, one thread.

Each child sets ``strips_jit.MR``/``NR``/``NW`` before anything of its own is compiled (the
intrinsics read them while they generate code), then times the kernel's fast path for one head
of T queries and keys, d = 64, float32: per block of STRIP_KEYS keys and strip of MR rows,
p = 2^(q·kᵀ − m) in the registers and the row sums (``_shifted_powers``), then acc += p·v
(``_accumulate``). m is each row's true max, so the child can check its acc against float64
NumPy before it reports a time (a shape whose code is wrong fails, it is not timed). GFLOP/s
count 4·T²·d; the peak is NumPy's 2048³ float32 matmul on the same thread, timed in each child.

    taskset -c 0 env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \\
        PYTHONPATH=src .venv/bin/python benchmarks/strip_shapes.py [--shapes 6x2,8x2] [--T 4096]

Children compile side by side (``--jobs``) and are timed one at a time. Not a test: nothing
asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def child(mr: int, nr: int, T: int, runs: int, compile_only: bool) -> dict:
    import numba
    import numpy as np

    from qkv.kernels import strips_jit as sj

    sj.MR, sj.NR, sj.NW = mr, nr, nr * sj.W
    MR, NW, W, KEYS = mr, nr * sj.W, sj.W, sj.STRIP_KEYS
    shifted, accumulate = sj._powers_of(True), sj._accumulate

    @numba.njit(nogil=True, cache=False)
    def pack(k, kp):
        S, d = k.shape
        for j0 in range(0, S, NW):
            for t in range(NW):
                for c in range(d):
                    kp[j0 * d + c * NW + t] = k[j0 + t, c] if j0 + t < S else 0.0

    @numba.njit(nogil=True, cache=False)
    def fast_path(q, kp, v, m, acc):
        n, d = q.shape
        S, d_v = v.shape
        scores = np.empty(MR * KEYS, q.dtype)
        sums = np.zeros(MR * W, q.dtype)
        above = False
        for j0 in range(0, S, KEYS):
            w = min(KEYS, S - j0)
            for i0 in range(0, n - n % MR, MR):
                rows, shifts = q[i0 : i0 + MR], m[i0 : i0 + MR]
                for j in range(0, w, NW):
                    above |= shifted(rows, d, kp, (j0 + j) * d, scores, j, w, sums, shifts, 64.0)
                for c in range(0, d_v, NW):
                    accumulate(scores, w, v, j0 * d_v + c, d_v, w, acc, i0 * d_v + c, d_v)
        return above

    d = 64
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((T, d)).astype(np.float32) * 0.5 for _ in range(3))
    s = q.astype(np.float64) @ k.T.astype(np.float64)
    m = s.max(axis=1).astype(np.float32)
    kp = np.empty(sj.packed_size(T, d), np.float32)
    acc = np.zeros((T, d), np.float32)
    pack(k, kp)
    fast_path(q, kp, v, m, acc)
    if compile_only:
        return {}
    rows = T - T % MR
    want = np.exp2(s[:rows] - m[:rows, None]) @ v.astype(np.float64)
    error = float(np.abs(acc[:rows] - want).max() / np.abs(want).max())
    if not error < 1e-4:
        return {"shape": f"{mr}x{nr}", "error": error}
    a = np.ones((2048, 2048), np.float32)
    out = np.empty_like(a)
    best, peak = np.inf, np.inf
    for _ in range(runs):
        t0 = time.perf_counter()
        np.matmul(a, a, out=out)
        peak = min(peak, time.perf_counter() - t0)
        t0 = time.perf_counter()
        pack(k, kp)
        fast_path(q, kp, v, m, acc)
        best = min(best, time.perf_counter() - t0)
    return {
        "shape": f"{mr}x{nr}",
        "lanes": W,
        "gflops": 4 * rows * T * d / best / 1e9,
        "peak": 2 * 2048**3 / peak / 1e9,
        "error": error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="6x2,8x2,12x2,14x2,4x4,6x4", help="MRxNR, ...")
    parser.add_argument("--T", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--compile-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mr, nr = (int(x) for x in args.child.split("x"))
        print(json.dumps(child(mr, nr, args.T, args.runs, args.compile_only)))
        return
    shapes = args.shapes.split(",")

    def run(shape: str, compile_only: bool) -> str:
        command = [sys.executable, __file__, "--child", shape, "--T", str(args.T)]
        command += ["--runs", str(args.runs)] + (["--compile-only"] if compile_only else [])
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            return json.dumps({"shape": shape, "failed": done.stderr.strip().splitlines()[-1:]})
        return done.stdout.strip().splitlines()[-1]

    # the first child compiles qkv's own kernels into numba's cache; then the shapes side by side
    run(shapes[0], True)
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda s: run(s, True), shapes[1:]))
    print(f"T = {args.T}, d = 64, float32, one thread, best of {args.runs}")
    for shape in shapes:
        r = json.loads(run(shape, False))
        if "gflops" in r:
            rate, peak = r["gflops"], r["peak"]
            print(
                f"{r['shape']:>5} ({r['lanes']} lanes)  {rate:6.1f} GFLOP/s  "
                f"{rate / peak:4.0%} of peak {peak:6.1f}   error {r['error']:.1e}"
            )
        else:
            print(f"{shape:>5}  {r}")


if __name__ == "__main__":
    main()
