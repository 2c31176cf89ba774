"""Start N local processes on gloo (127.0.0.1), run a function in each, collect the results.

Each rank sends its result, or its error in one line, back through its own pipe; nothing is
written to disk. The first rank to fail stops the others at once (SIGTERM, then SIGKILL), and
so does Ctrl-C in the parent: no rank outlives ``run``. Ranks ignore SIGINT from their first
instruction (a terminal's Ctrl-C reaches the whole process group, also while a rank is still
importing) and die with their parent (Linux).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import socket
import threading
import time
from datetime import timedelta
from multiprocessing.connection import wait
from typing import NamedTuple

from qkv.checks import positive_int

GRACE_S = 2.0  # after SIGTERM, before SIGKILL


class _Failure(NamedTuple):
    at: float  # time.monotonic() when the rank failed (one clock for every process)
    message: str  # "rank 3: ValueError: …"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(fn, world_size: int, *args, timeout_s: float = 60.0) -> list:
    """``fn(rank, world_size, *args)`` in ``world_size`` processes; their return values in rank
    order. A rank that raises makes this raise RuntimeError naming the rank and its error (the
    first to fail: its neighbours then fail on the closed connection); the other ranks are
    stopped at once. Collectives time out after ``timeout_s``."""
    positive_int("world_size", world_size)
    ctx = multiprocessing.get_context("spawn")
    port = free_port()
    pipes, procs = [], []
    try:
        with _started_ignoring_sigint():
            for rank in range(world_size):
                receive, send = ctx.Pipe(duplex=False)
                p = ctx.Process(
                    target=_worker,
                    name=f"qkv-ring-rank-{rank}",
                    daemon=True,
                    args=(rank, world_size, port, timeout_s, fn, args, send),
                )
                p.start()
                send.close()  # the child holds the only write end: EOF when it dies
                pipes.append(receive)
                procs.append(p)
        return _collect(pipes, procs)
    finally:
        _stop(procs)
        for c in pipes:
            c.close()


@contextlib.contextmanager
def _started_ignoring_sigint():
    """Processes started inside begin with SIGINT ignored: an ignored signal stays ignored
    across exec, and Python then installs no KeyboardInterrupt handler, so Ctrl-C cannot
    interrupt a rank's imports with a traceback. The parent's handler is back when the block
    ends (milliseconds later). Handlers can be set from the main thread only; elsewhere each
    rank ignores SIGINT from ``_worker`` on."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _collect(pipes, procs) -> list:
    results: dict[int, object] = {}
    failures: list[_Failure] = []
    open_pipes = dict(enumerate(pipes))
    while open_pipes and not failures:
        for c in wait(list(open_pipes.values())):
            rank = pipes.index(c)
            try:
                value = pipes[rank].recv()  # the Connection itself (wait's type is wider)
            except EOFError:  # the rank died without a word (killed, or a crash in C++)
                del open_pipes[rank]
                procs[rank].join(GRACE_S)
                if rank not in results:
                    code = procs[rank].exitcode
                    failures.append(
                        _Failure(time.monotonic(), f"rank {rank} exited early (exit code {code})")
                    )
                continue
            if isinstance(value, _Failure):
                failures.append(value)
            else:
                results[rank] = value
    if failures:
        # neighbours of the failing rank may report within moments; the earliest is the cause
        for c in wait(list(open_pipes.values()), timeout=0.2):
            try:
                value = pipes[pipes.index(c)].recv()
            except EOFError:
                continue
            if isinstance(value, _Failure):
                failures.append(value)
        raise RuntimeError(f"a rank failed, so the ring stopped: {min(failures).message}")
    return [results[r] for r in range(len(procs))]


def _stop(procs) -> None:
    """SIGTERM every rank still running, SIGKILL those still there after GRACE_S."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + GRACE_S
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()


def _worker(rank, world_size, port, timeout_s, fn, args, pipe):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it stops us with SIGTERM
    _die_with_parent()
    try:
        import torch.distributed as dist

        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
        )
        value = fn(rank, world_size, *args)
    except Exception as e:
        pipe.send(_Failure(time.monotonic(), f"rank {rank}: {type(e).__name__}: {_one_line(e)}"))
        raise SystemExit(1) from None
    pipe.send(value)
    dist.destroy_process_group()


def _one_line(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else "(no message)"


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no-op elsewhere)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
