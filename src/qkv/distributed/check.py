"""Ring attention checked against single-process ``qkv.attention`` on the same inputs.

Every rank makes its own slice of q, k, v from a seed (no rank ever holds the whole sequence),
runs the ring forward (and backward), and reports its error against the float64 reference, its
time, the bytes it sent and its peak memory growth.
"""

from __future__ import annotations

import math
import resource
import time
from dataclasses import asdict, dataclass

import numpy as np

from qkv.checks import scale_factor


@dataclass(frozen=True)
class Setup:
    T: int = 1024
    heads: int = 1
    d: int = 64
    causal: bool = False
    scale: float | None = None
    temperature: float = 1.0
    dtype: str = "float64"
    grad: bool = False
    seed: int = 0
    fail_rank: int | None = None  # a rank that raises on purpose (tests the error path)
    chunk_bytes: int = 1 << 26  # scores per chunk of query rows


def bounds(T: int, world: int) -> list[tuple[int, int]]:
    """Contiguous slices of T positions over ``world`` ranks; the first T % world get one more."""
    base, extra = divmod(T, world)
    starts = np.cumsum([0] + [base + (r < extra) for r in range(world)])
    return [(int(starts[r]), int(starts[r + 1])) for r in range(world)]


def inputs(setup: Setup, start: int, stop: int):
    """q, k, v, dz (heads, stop − start, d) for positions [start, stop), float64: position p's
    rows come from default_rng((seed, p)), so any slice is made alone."""
    rows = [
        np.random.default_rng((setup.seed, p)).standard_normal((4, setup.heads, setup.d))
        for p in range(start, stop)
    ]
    a = np.stack(rows, axis=2) if rows else np.zeros((4, setup.heads, 0, setup.d))
    return a[0], a[1], a[2], a[3]  # (heads, n, d) each


def reference(setup: Setup, dtype: str = "float64", arrays=None):
    """Single-process qkv.attention (torch path) on the whole sequence: z and, with grad,
    dq, dk, dv for the upstream gradient dz. ``arrays``: ``inputs(setup, 0, T)``, if made."""
    import torch

    from qkv.attention import attention

    q, k, v, dz = (
        torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True)
        for a in (arrays or inputs(setup, 0, setup.T))
    )
    z = attention(q, k, v, causal=setup.causal, scale=setup.scale, temperature=setup.temperature)
    grads = None
    if setup.grad:
        z.backward(dz.detach())
        grads = [t.grad.numpy() for t in (q, k, v)]
    return z.detach().numpy(), grads


def worker(rank: int, world: int, setup: Setup) -> dict:
    """One rank's part: the ring on its slice, checked against the float64 reference."""
    import torch

    from qkv.distributed import ring_attention

    if rank == setup.fail_rank:
        raise ValueError(f"rank {rank} was asked to fail")
    start, stop = bounds(setup.T, world)[rank]
    dtype = getattr(torch, setup.dtype)
    q, k, v, dz = (
        torch.tensor(a, dtype=dtype, requires_grad=True) for a in inputs(setup, start, stop)
    )
    stats = {}
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    z = ring_attention(
        q,
        k,
        v,
        causal=setup.causal,
        scale=setup.scale,
        temperature=setup.temperature,
        chunk_bytes=setup.chunk_bytes,
        stats=stats,
    )
    seconds = time.perf_counter() - t0
    if setup.grad:
        z.backward(dz.detach())
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {
        "rank": rank,
        "start": start,
        "stop": stop,
        "seconds": seconds,
        "peak_growth_bytes": (rss1 - rss0) * 1024,
        **stats,
        "z": z.detach().numpy(),
    }
    if setup.grad:
        out["grads"] = [t.grad.numpy() for t in (q, k, v)]
    return out


def workers(rank: int, world: int, setups: list[Setup]) -> list[dict]:
    """Several checks in one set of processes (process start-up dominates small checks)."""
    return [worker(rank, world, s) for s in setups]


def compare(results: list[dict], setup: Setup) -> dict:
    """Max abs differences of the gathered ring results against the float64 reference, the
    tolerance they are held to (``tolerance``) and whether they pass (``ok``); for float32,
    also the float32 single-process error against float64 (``reference_error``)."""
    arrays = inputs(setup, 0, setup.T)
    z_ref, grads_ref = reference(setup, arrays=arrays)
    z = np.concatenate([r["z"] for r in results], axis=-2)
    report = {
        "setup": asdict(setup),
        "world_size": len(results),
        "max_abs_diff": float(np.abs(z - z_ref).max()) if z.size else 0.0,
        "seconds": max(r["seconds"] for r in results),
        "bytes_sent_per_rank": [r.get("bytes_sent", 0) for r in results],
        "peak_growth_bytes_per_rank": [r["peak_growth_bytes"] for r in results],
    }
    if setup.dtype == "float64":
        report["tolerance"] = FLOAT64_TOLERANCE
    else:
        z32, _ = reference(setup, setup.dtype, arrays=arrays)
        report["reference_error"] = float(np.abs(z32 - z_ref).max())
        q, k, v, _ = arrays
        merges = sum(stop > start for start, stop in bounds(setup.T, len(results))) - 1
        factor = abs(scale_factor(setup.scale, setup.d)) / setup.temperature
        report["tolerance"] = float32_tolerance(
            report["reference_error"],
            merges=max(merges, 0),
            max_v=float(np.abs(v).max()) if v.size else 0.0,
            max_score=factor * _max_norm(q) * _max_norm(k),
            T=setup.T,
        )
    report["ok"] = report["max_abs_diff"] <= report["tolerance"]
    if setup.grad:
        diffs = []
        for i in range(3):
            g = np.concatenate([r["grads"][i] for r in results], axis=-2)
            diffs.append(float(np.abs(g - grads_ref[i]).max()))
        report["grad_max_abs_diff"] = diffs
    return report


FLOAT64_TOLERANCE = 1e-10
U32 = 2.0**-24  # float32's unit roundoff: one rounding moves x by at most U32·|x|


def float32_tolerance(
    reference_error: float, *, merges: int, max_v: float, max_score: float, T: int
) -> float:
    """How far float32 ring attention may lie from the float64 result: the error one process
    makes in float32, twice, plus a first-order bound (in the unit roundoff u = 2⁻²⁴) on the
    rounding that the ring's merges add, which one process does not do:

        tol = 2·E₁ + 2u·V + u·V·(m·(ℓ + 9) + m(m + 3)/4·(ℓ + ln T + 4))

    E₁ = ``reference_error``: one process's float32 error against float64, measured. Each block a
    rank computes runs the steps one process runs (scores, softmax, weighted sum over a subset
    of the keys, from the same rounded inputs), so its error is of that kind; twice E₁ allows for
    other rounding luck (another summation order below), and 2u·V for each side's last rounding.
    (A worst-case bound for those steps too, γ_d and γ_T over the sums, is 2·10⁻³ at T = 3001
    and would pass a ring that sends K and V in bfloat16.)
    V = ``max_v``: max |v|; every z and z_b is a convex combination of rows of v, so |z| ≤ V.
    m = ``merges``: the merges a row goes through (blocks of keys it sees − 1 ≤ N − 1).
    ℓ ≥ |lse| everywhere: lse lies between a row's max score and that plus ln T, and |score| ≤
    ``max_score`` (scale/τ · max‖q‖ · max‖k‖, Cauchy–Schwarz): ℓ = max_score + ln T.

    The merges are what one process does not do. In z, lse = merge_partials(z_a, lse_a, z_b,
    lse_b), with w_x = e^(lse_x − lse) and w_a + w_b = 1, the fresh roundings are: lse =
    logaddexp(lse_a, lse_b), u·ℓ + 4u (the add, the exp and log1p of the gap); the exponent
    lse_x − lse, u·|lse_x − lse|; e^, 2u (one ulp); the products and the sum, 2u·V. Weighted
    by w_x·|z_x| ≤ w_x·V they add u·V·(ℓ + 9), since Σ_x w_x·|lse_x − lse| = Σ_x w_x·(−ln w_x)
    ≤ ln 2 < 1. Errors ε_a, ε_b that lse_a, lse_b bring move z by 2·w_a·w_b·|ε_a − ε_b|·V ≤
    V·(|ε_a| + |ε_b|)/2. Each lse made (a block's: the log of its sum, ≤ ln T, plus its max; a
    merge's) is rounded by at most r = u·(ℓ + ln T + 4), so merge i (from 1) takes |ε_a| ≤ i·r
    and |ε_b| ≤ r, and the halves sum to m(m + 3)/4 · r over m merges. The first merge, into an
    empty (z = 0, lse = −∞), is exact.
    """
    if merges < 0 or T < 1:
        raise ValueError(f"merges must be ≥ 0 and T ≥ 1, got merges={merges}, T={T}")
    ell = max_score + math.log(T)
    m = merges
    merge_roundings = m * (ell + 9) + m * (m + 3) / 4 * (ell + math.log(T) + 4)
    return 2 * reference_error + U32 * max_v * (2 + merge_roundings)


def _max_norm(a) -> float:
    """Largest Euclidean norm of a row (the last axis) of ``a``; 0 for no rows."""
    return float(np.linalg.norm(a, axis=-1).max()) if a.size else 0.0
