"""Threads for the kernels: one worker per CPU, a pool kept for the process, and BLAS held to
one thread per worker while the workers run (no oversubscription)."""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor


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


class single_threaded_blas:
    """While worker threads run, BLAS uses one thread each (no oversubscription)."""

    def __enter__(self):
        controller = _blas_controller()
        self.limits = None if controller is None else controller.limit(limits=1,
                                                                        user_api="blas")
        return self

    def __exit__(self, *exc):
        if self.limits is not None:
            self.limits.restore_original_limits()


@functools.cache
def _blas_controller():
    """threadpoolctl's view of the loaded BLAS libraries, found once (finding them takes ~0.5
    ms; setting their thread count afterwards takes microseconds). None without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return None
    return ThreadpoolController()
