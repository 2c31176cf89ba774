"""Ring attention checked against single-process ``qkv.attention`` on the same inputs.

Every rank makes its own slice of q, k, v from a seed (no rank ever holds the whole sequence),
runs the ring forward (and backward), and reports its error against the float64 reference, its
time, the bytes it sent and its peak memory growth.
"""

from __future__ import annotations

import resource
import time
from dataclasses import asdict, dataclass

import numpy as np


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


def reference(setup: Setup, dtype: str = "float64"):
    """Single-process qkv.attention (torch path) on the whole sequence: z and, with grad,
    dq, dk, dv for the upstream gradient dz."""
    import torch

    from qkv.attention import attention

    q, k, v, dz = (
        torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True)
        for a in inputs(setup, 0, setup.T)
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
    """Max abs differences of the gathered ring results against the float64 reference, and,
    for float32, the float32 reference's own error (the tolerance is twice that)."""
    z_ref, grads_ref = reference(setup)
    z = np.concatenate([r["z"] for r in results], axis=-2)
    report = {
        "setup": asdict(setup),
        "world_size": len(results),
        "max_abs_diff": float(np.abs(z - z_ref).max()) if z.size else 0.0,
        "seconds": max(r["seconds"] for r in results),
        "bytes_sent_per_rank": [r.get("bytes_sent", 0) for r in results],
        "peak_growth_bytes_per_rank": [r["peak_growth_bytes"] for r in results],
    }
    if setup.dtype != "float64":
        z32, _ = reference(setup, setup.dtype)
        report["reference_error"] = float(np.abs(z32 - z_ref).max())
    if setup.grad:
        diffs = []
        for i in range(3):
            g = np.concatenate([r["grads"][i] for r in results], axis=-2)
            diffs.append(float(np.abs(g - grads_ref[i]).max()))
        report["grad_max_abs_diff"] = diffs
    return report
