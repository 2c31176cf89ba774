"""BLAS held to one thread: one setting for the whole process, shared by every user (the
kernels' worker threads, and the traced steps' matrix products, whose rounding must not depend
on the thread count: ``steps.rows_matmul``)."""

from __future__ import annotations

import functools
import os
import threading


class single_threaded_blas:
    """While worker threads run, BLAS uses one thread each (no oversubscription).

    The BLAS thread count is one setting for the whole process, so concurrent callers share
    one limit: the first to enter sets it, the last to leave restores the original (a count
    under a lock). Nested and concurrent uses are safe, and the first and the last user may be
    different threads.

    That last point needs care with threadpoolctl ≥ 3.8: for a BLAS whose thread pool is
    process-wide (OpenBLAS on pthreads, as NumPy's wheels ship it) it lets one thread change
    the count, the first to set it, until that thread lets go or ends, and silently ignores
    the others. OpenBLAS itself takes the count from any thread. So every change here lets go
    of threadpoolctl's control at once: no thread keeps it between uses, and the restore works
    from whichever thread leaves last. While another thread holds the control (inside its own
    ``threadpool_limits``), the count is that thread's: the limit is skipped, and so is its
    restore.
    """

    _lock = threading.Lock()
    _users = 0
    _saved: list = []  # (library, its original count) for each library limited, while in use

    def __enter__(self):
        cls = type(self)
        with cls._lock:
            if cls._users == 0:
                cls._saved = _limit_to_one()
            cls._users += 1
        return self

    def __exit__(self, *exc):
        cls = type(self)
        with cls._lock:
            if cls._users == 0:  # entered before a fork, left in the child, which forgot it
                return
            cls._users -= 1
            if cls._users == 0:
                for lib, original in cls._saved:
                    _set_threads(lib, original)
                cls._saved = []

    @classmethod
    def _forget(cls):
        """In a forked child: no thread of the parent is inside any more."""
        cls._lock, cls._users, cls._saved = threading.Lock(), 0, []


os.register_at_fork(after_in_child=single_threaded_blas._forget)


def _limit_to_one() -> list:
    """Set every BLAS library to one thread; the (library, original count) of each one changed."""
    saved = []
    for lib in blas_libraries():
        original = lib.get_num_threads()
        if original is None or original == 1:
            continue
        _set_threads(lib, 1)
        if lib.get_num_threads() == 1:  # else another thread holds threadpoolctl's control
            saved.append((lib, original))
    return saved


def _set_threads(lib, n: int) -> None:
    """Set one library's thread count, then let go of threadpoolctl's control of it (≥ 3.8;
    a no-op when this thread does not hold it), so that the next change may come from any
    thread."""
    lib.set_num_threads(n)
    let_go = getattr(lib, "clear_controlling_thread", None)
    if let_go is not None:
        let_go()


@functools.cache
def blas_libraries() -> tuple:
    """threadpoolctl's controllers of the loaded BLAS libraries, found once (finding them takes
    ~0.5 ms; setting a thread count afterwards takes microseconds); none without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return ()
    return tuple(lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas")
