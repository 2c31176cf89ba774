"""Run a block of the benchmark on n cores, every library told the same: the process and all
its threads pinned to n CPUs (``os.sched_setaffinity`` on each thread, so pools started
earlier move too, and threads started inside inherit it), NumPy's BLAS and the OpenMP
runtimes limited to n threads (threadpoolctl), torch's intra-op threads and numba's threads
set to n. qkv's kernels start one worker per CPU the calling thread may use, so they follow.
Everything is restored on leaving the block."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path


def usable_cpus() -> list[int]:
    """The CPUs this process may run on, in order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return list(range(os.cpu_count() or 1))


def counts(spec: str) -> list[int]:
    """'1,all' -> [1, every usable CPU] (duplicates dropped, in order); ValueError naming what
    was expected for anything else."""
    top = len(usable_cpus())
    out = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        n = top if part == "all" else int(part) if part.isdigit() else None
        if n is None or not 1 <= n <= top:
            raise ValueError(
                f"--threads: expected counts from 1 to {top} or 'all', comma-separated, "
                f"got {spec!r}"
            )
        if n not in out:
            out.append(n)
    if not out:
        raise ValueError(
            f"--threads: expected counts from 1 to {top} or 'all', comma-separated, got {spec!r}"
        )
    return out


@contextlib.contextmanager
def pinned(n: int):
    """Within the block: n threads everywhere, on the first n usable CPUs (yields them)."""
    before = set(usable_cpus())
    cpus = sorted(before)[:n]
    _pin_all(set(cpus))
    with contextlib.ExitStack() as stack:
        try:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(limits=n))  # BLAS and OpenMP libraries
        except ImportError:  # pragma: no cover - threadpoolctl is a dependency
            pass
        stack.enter_context(_torch_threads(n))
        stack.enter_context(_numba_threads(n))
        try:
            yield cpus
        finally:
            _pin_all(before)


def _pin_all(cpus: set[int]) -> None:
    """Every thread of this process (and so each thread it starts later) on ``cpus``."""
    tasks = Path("/proc/self/task")
    ids = [int(p.name) for p in tasks.iterdir()] if tasks.is_dir() else [0]
    for tid in ids:
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(tid, cpus)


@contextlib.contextmanager
def _torch_threads(n: int):
    torch = sys.modules.get("torch")  # only when loaded: a peer that uses it loads it first
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def _numba_threads(n: int):
    numba = sys.modules.get("numba")
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if numba is None or not getattr(parallel, "_is_initialized", False):
        yield  # numba's thread pool is not started (qkv's kernels use their own workers)
        return
    before = numba.get_num_threads()
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(before)
