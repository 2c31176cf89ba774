"""Threads for the kernels: one worker per CPU, a pool kept for the process, and BLAS held to
one thread per worker while the workers run (no oversubscription: ``qkv.blas``); a large
matrix product split by rows over the same workers (``rows_product``)."""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from qkv.blas import single_threaded_blas

__all__ = ["default_workers", "pool", "rows_product", "single_threaded_blas", "spread"]

# multiply-adds from which ``rows_product`` splits a product over the workers (below, one call)
PRODUCT_SPLIT = 1 << 22
SPLIT_ROWS = 256  # rows per worker at least: smaller blocks ran slower than BLAS threads


def default_workers() -> int:
    """Threads for the kernel: one per CPU this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


@functools.cache
def pool(workers: int) -> ThreadPoolExecutor:
    """A thread pool kept for the process: starting threads on every call costs more than a
    decoding step's work. Forgotten in a forked child, whose copy has no live threads."""
    return ThreadPoolExecutor(workers, thread_name_prefix="qkv-blocked")


def spread(fn, items, workers: int) -> list:
    """[fn(item) for item in items] on ``workers`` threads of the pool, in order, BLAS held to
    one thread each while they run (no oversubscription)."""
    with single_threaded_blas():
        return list(pool(workers).map(fn, items))


def rows_product(a, b):
    """a @ b for NumPy matrices (M, K) @ (K, N): a large one as one block of rows per worker,
    each worker's BLAS on one thread. BLAS's own threads keep spinning for a while after their
    product, and took a core from the kernel workers that ran next (a model's attention right
    after its projections: 98 ms alone, 125–140 ms after a product threaded by OpenBLAS)."""
    M, K = a.shape
    N = b.shape[1]
    workers = min(default_workers(), M // SPLIT_ROWS)
    if workers < 2 or M * K * N < PRODUCT_SPLIT:
        return a @ b
    out = np.empty((M, N), dtype=np.result_type(a, b))
    edges = [M * i // workers for i in range(workers + 1)]

    def part(i: int) -> None:
        np.matmul(a[edges[i] : edges[i + 1]], b, out=out[edges[i] : edges[i + 1]])

    spread(part, range(workers), workers)
    return out


os.register_at_fork(after_in_child=pool.cache_clear)
