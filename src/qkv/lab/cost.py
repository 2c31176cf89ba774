"""The cost of attention as T doubles: the traced path keeps T² numbers, the blocked path does not."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from qkv import attention
from qkv.lab.result import Result, loglog_panels

CLAIM = (
    "the score matrix makes attention's memory grow as T² (every step of the trace is "
    "T × T), while exact blocked attention needs memory growing only as T; time grows as "
    "T² for both"
)
SIZES = (256, 512, 1024, 2048, 4096)


def _measure(fn) -> tuple[float, int]:
    """Seconds (best of 3) and peak bytes NumPy allocated (tracemalloc) for fn()."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    tracemalloc.start()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return best, peak


def run(*, seed: int = 0, sizes=SIZES, d: int = 64) -> Result:
    rng = np.random.default_rng(seed)
    rows = []
    for T in sizes:
        q, k, v = (rng.standard_normal((T, d)).astype(np.float32) for _ in range(3))
        traced_s, traced_b = _measure(
            lambda q=q, k=k, v=v: attention(q, k, v, causal=True, return_trace=True)
        )
        blocked_s, blocked_b = _measure(
            lambda q=q, k=k, v=v: attention(q, k, v, causal=True, backend="blocked")
        )
        rows.append([T, T * T, traced_s, traced_b / 2**20, blocked_s, blocked_b / 2**20])
    columns = ["T", "scores T²", "traced s", "traced MiB", "blocked s", "blocked MiB"]
    a = np.array(rows, dtype=float)
    # the curves of the picture: (values, style, label) per panel
    memory = [
        (a[:, 3], "o-", "traced (every step kept)"),
        (a[:, 5], "s-", "blocked (exact, no T×T)"),
    ]
    seconds = [(a[:, 2], "o-", "traced"), (a[:, 4], "s-", "blocked")]
    # growth per doubling of T, over the last doublings (small T is dominated by fixed costs)
    traced_growth = a[-1, 3] / a[-2, 3]
    blocked_growth = a[-1, 5] / a[-2, 5]
    supported = traced_growth > 3.0 and blocked_growth < 2.5
    evidence = (
        f"from T = {int(a[-2, 0])} to {int(a[-1, 0])} the traced path's memory grows "
        f"{traced_growth:.1f}× ({a[-1, 3]:.0f} MiB) and the blocked path's "
        f"{blocked_growth:.1f}× ({a[-1, 5]:.1f} MiB); time grows {a[-1, 2] / a[-2, 2]:.1f}× "
        f"and {a[-1, 4] / a[-2, 4]:.1f}×"
    )

    def plot(fig):
        panels = [("peak MiB", memory), ("seconds (causal, d = 64, float32)", seconds)]
        loglog_panels(fig, a[:, 0], "T", panels)

    return Result("cost", CLAIM, columns, rows, bool(supported), evidence, plot=plot)
