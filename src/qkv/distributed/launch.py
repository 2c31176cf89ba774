"""Start N local processes on gloo (127.0.0.1), run a function in each, collect the results."""

from __future__ import annotations

import socket
import time
import traceback
from datetime import timedelta
from typing import NamedTuple


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(fn, world_size: int, *args, timeout_s: float = 60.0) -> list:
    """``fn(rank, world_size, *args)`` in ``world_size`` processes; their return values in rank
    order. A rank that raises makes this raise RuntimeError naming the rank and its error; the
    other ranks are stopped (their collectives also time out after ``timeout_s``)."""
    import torch.multiprocessing as mp

    if world_size < 1:
        raise ValueError(f"world_size must be ≥ 1, got {world_size}")
    results = mp.get_context("spawn").SimpleQueue()
    port = free_port()
    out = []
    try:
        procs = mp.start_processes(_worker, args=(world_size, port, timeout_s, fn, args, results),
                                   nprocs=world_size, join=False, start_method="spawn")
        # read while waiting: a rank blocks on a full pipe until its result is taken
        while not procs.join(timeout=0.05):
            while not results.empty():
                out.append(results.get())
    except mp.ProcessRaisedException as e:
        while not results.empty():
            out.append(results.get())
        failures = sorted(v for _, v in out if isinstance(v, _Failure))
        first = failures[0].message if failures else _last_line(str(e))
        raise RuntimeError(f"a rank failed, so the ring stopped: {first}") from None
    except mp.ProcessExitedException as e:
        raise RuntimeError(f"a rank exited early (exit code {e.exit_code}), so the ring "
                           f"stopped") from None
    while not results.empty():
        out.append(results.get())
    return [value for _, value in sorted(out, key=lambda rv: rv[0])]


def _worker(rank, world_size, port, timeout_s, fn, args, results):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=timeout_s))
    try:
        results.put((rank, fn(rank, world_size, *args)))
    except Exception as e:
        # the first failure is the cause; its neighbours then fail on the closed connection
        message = f"rank {rank}: {type(e).__name__}: {e}"
        results.put((rank, _Failure(time.monotonic(), message)))
        raise RuntimeError(f"{message}\n{traceback.format_exc()}") from None
    finally:
        dist.destroy_process_group()


class _Failure(NamedTuple):
    at: float  # time.monotonic() when the rank failed
    message: str


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("RuntimeError: rank "):
            return ln.removeprefix("RuntimeError: ")
    return lines[-1] if lines else text
