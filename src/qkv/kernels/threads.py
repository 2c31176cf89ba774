"""Threads for the kernels: one worker per CPU, a pool kept for the process, and BLAS held to
one thread per worker while the workers run (no oversubscription)."""

from __future__ import annotations

import functools
import os
import threading
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
    """While worker threads run, BLAS uses one thread each (no oversubscription).

    The BLAS thread count is one setting for the whole process, so concurrent callers share
    one limit: the first to enter sets it, the last to leave restores the original (a count
    under a lock). Nested and concurrent uses are safe.
    """

    _lock = threading.Lock()
    _users = 0
    _limits = None  # threadpoolctl's handle while any user is inside

    def __enter__(self):
        cls = type(self)
        with cls._lock:
            if cls._users == 0:
                controller = _blas_controller()
                cls._limits = (
                    None if controller is None else controller.limit(limits=1, user_api="blas")
                )
            cls._users += 1
        return self

    def __exit__(self, *exc):
        cls = type(self)
        with cls._lock:
            cls._users -= 1
            if cls._users == 0 and cls._limits is not None:
                cls._limits.restore_original_limits()
                cls._limits = None

    @classmethod
    def _forget(cls):
        """In a forked child: no thread of the parent is inside any more."""
        cls._lock, cls._users, cls._limits = threading.Lock(), 0, None


os.register_at_fork(after_in_child=single_threaded_blas._forget)


@functools.cache
def _blas_controller():
    """threadpoolctl's view of the loaded BLAS libraries, found once (finding them takes ~0.5
    ms; setting their thread count afterwards takes microseconds). None without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return None
    return ThreadpoolController()
