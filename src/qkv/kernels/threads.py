"""Threads for the kernels: one worker per CPU, a pool kept for the process, and BLAS held to
one thread per worker while the workers run (no oversubscription: ``qkv.blas``)."""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor

from qkv.blas import single_threaded_blas

__all__ = ["default_workers", "pool", "single_threaded_blas"]


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


os.register_at_fork(after_in_child=pool.cache_clear)
