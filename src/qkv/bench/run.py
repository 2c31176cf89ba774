"""The benchmark behind ``qkv bench``: exact attention side by side with its peers here.

The whole benchmark runs once per thread count (by default one core, then every core), with
every library pinned to that many cores and told that many threads (``bench/pinned.py``). For
each configuration every peer (``qkv.bench.peers.PEERS``) runs on the same float32 inputs in
this process: a warm-up, then repeats interleaved across peers; the median is reported with
GFLOP/s (4·L·T·d per head, half for causal prefill), the best repeat with its share of NumPy's
float32 GEMM peak at the same thread count (the peak is the best of its repeats too), throughput
relative to torch SDPA in the same run, peak extra memory (one child process per configuration,
at the largest thread count) and the largest error against a float64 reference (on up to 64
query rows per head). The header names the processor (``kernels/processor.py``).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

import numpy as np

from qkv.bench import peers as peers_
from qkv.bench.peers import have_torch
from qkv.bench.pinned import pinned
from qkv.kernels import processor


@dataclass(frozen=True)
class Quick:
    """The sizes of ``qkv bench --quick``: a smoke test of every peer in a few seconds."""

    T: tuple[int, ...] = (256,)
    heads: int = 2
    d: int = 32
    min_time: float = 0.02
    gemm_n: int = 1024
    settle: float = 0.02
    copy_bytes: int = 1 << 24


QUICK = Quick()


def progress_bar(show: bool):
    """A rich progress bar on stderr (what runs, a bar, the time so far) that vanishes when
    done; ``show`` False: nothing is drawn (``--json``)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not show,
    )


def run(
    configs,
    chosen,
    *,
    threads,
    min_time,
    max_memory,
    memory,
    gemm_n,
    settle=0.25,
    show_progress=True,
    skipped=None,
    copy_bytes=1 << 28,
) -> dict:
    """Measure every configuration at each thread count of ``threads``, every library pinned
    to that many cores (``bench/pinned.py``); return the report (as ``--json`` prints it).
    Peak memory is measured once, at the largest thread count."""
    steps = sum(1 + 2 * len(chosen) * len(configs) for _ in threads) + memory * len(configs)
    progress = progress_bar(show_progress)
    runs = []
    with progress:
        task = progress.add_task("GEMM peak", total=steps)
        for n in threads:
            with pinned(n) as cpus:
                progress.update(task, description=f"{n} thread(s): GEMM peak")
                peak = peers_.gemm_peak(gemm_n)
                decode = any(c.decode for c in configs)
                copy = peers_.copy_bandwidth(copy_bytes) if decode else None
                progress.advance(task)
                results, jobs = [], []
                for cfg in configs:
                    progress.update(task, description=f"{n} thread(s): {cfg.label}")
                    entry, ran = _measure(
                        cfg,
                        chosen,
                        peak,
                        copy,
                        min_time,
                        max_memory,
                        settle,
                        lambda: progress.advance(task),
                    )
                    results.append(entry)
                    jobs.append((cfg, ran))
                if memory and n == max(threads):
                    progress.update(task, description="peak memory (child process)")
                    _add_memory(results, jobs, n, lambda: progress.advance(task))
            runs.append(
                {
                    "threads": n,
                    "cpus": cpus,
                    "gemm": {"n": gemm_n, "gflops": peak},
                    "copy": None if copy is None else {"bytes": copy_bytes, "gb_per_s": copy},
                    "configs": results,
                }
            )
    return {"machine": machine(), "skipped_peers": dict(skipped or {}), "runs": runs}


def _add_memory(results, jobs, threads, step) -> None:
    """Each peer's peak extra memory (``peers.measure_memory``) into its row."""
    for entry, (_, ran), mem in zip(
        results, jobs, peers_.measure_memory(jobs, threads=threads), strict=False
    ):
        for row in entry["results"]:
            if row["peer"] in ran:
                row["peak_extra_bytes"] = mem.get(row["peer"])
        if "error" in mem:
            entry["memory_error"] = mem["error"]
        step()


def _measure(cfg, chosen, peak, copy, min_time, max_memory, settle, step) -> tuple[dict, list]:
    """One configuration's timings and errors, and the peers that ran."""
    q, k, v = peers_.inputs(cfg)
    expected = peers_.float64_reference(cfg, q, k, v)
    rows = {p: {"peer": p} for p in chosen}
    runners = {}
    for p in chosen:
        need = peers_.scores_bytes(cfg, p)
        if need > max_memory:
            rows[p].update(skipped="its score matrices exceed --max-memory", needs_bytes=need)
            step(), step()
        else:
            runners[p] = peers_.make_runner(p, cfg, q, k, v)
    medians, outputs, bests = peers_.time_peers(
        runners, min_time=min_time, settle=settle, on_step=step
    )
    sdpa = medians.get("torch sdpa")
    for p, t in medians.items():
        gflops = cfg.flops / t / 1e9
        rows[p].update(
            median_s=t,
            best_s=bests[p],
            gflops=gflops,
            # the best repeat against the GEMM peak, itself the best of its repeats: the same
            # statistic on both sides (other work on the machine only ever slows a run down)
            pct_peak=100 * cfg.flops / bests[p] / 1e9 / peak,
            vs_sdpa=None if sdpa is None else sdpa / t,
            max_abs_err=peers_.max_error(outputs[p], cfg, expected),
        )
        if cfg.decode:  # memory speed: K and V read once per step, against a plain copy
            gbs = cfg.kv_bytes / t / 1e9  # of the median; its share of the copy speed (itself
            best = cfg.kv_bytes / bests[p] / 1e9  # the best of its repeats) from the best
            rows[p].update(kv_gb_per_s=gbs, pct_copy=None if copy is None else 100 * best / copy)
    config = {**cfg.__dict__, "label": cfg.label, "L": cfg.L, "flops": cfg.flops}
    return {"config": config, "results": [rows[p] for p in chosen]}, list(runners)


def header(machine_: dict) -> list[str]:
    """Lines naming the machine: processor, libraries, BLAS and the kernel it runs."""
    lines = [
        machine_["cpu"],
        f"Python {machine_['python']} · NumPy {machine_['numpy']}"
        + (f" · torch {machine_['torch']}" if "torch" in machine_ else " · torch not installed")
        + (f" · numba {machine_['numba']}" if "numba" in machine_ else ""),
    ]
    for lib in machine_.get("blas", []):
        kernel = f", kernel {lib['architecture']}" if lib.get("architecture") else ""
        where = lib["filepath"].rsplit("/", 1)[-1] if lib.get("filepath") else "?"
        lines.append(
            f"{lib.get('user_api', 'blas')}: {lib['internal_api']} {lib['version'] or ''}"
            f"{kernel} ({where})"
        )
    pins = {k: v for k, v in machine_.get("env", {}).items() if v is not None}
    if pins:
        lines.append("environment: " + ", ".join(f"{k}={v}" for k, v in pins.items()))
    return lines


def render(report: dict, console) -> None:
    """The report as rich tables: one per thread count, one section per configuration, one
    row per peer."""
    from rich.markup import escape

    console.print("[bold]qkv bench[/] · " + "\n".join(header(report["machine"])))
    for run_ in report["runs"]:
        n, gemm = run_["threads"], run_["gemm"]
        where = ",".join(map(str, run_["cpus"]))
        console.print(
            f"[bold]{n} thread{'s' * (n > 1)}[/] on CPU {where} (BLAS, OpenMP, torch, numba, "
            f"qkv told {n}) · NumPy float32 GEMM peak {gemm['gflops']:.1f} GFLOP/s "
            f"(matmul {gemm['n']}³, best of 3)"
        )
        if run_.get("copy"):
            console.print(
                f"copy bandwidth {run_['copy']['gb_per_s']:.1f} GB/s (np.copyto of "
                f"{_mib(run_['copy']['bytes'])}, read + write)"
            )
        console.print(_table(run_["configs"]))
    for peer, why in report.get("skipped_peers", {}).items():
        console.print(f"[yellow]skipped {peer}[/]: {escape(why)}")  # why holds [extras]
    console.print(
        "[dim]median and best of repeats after a warm-up · GFLOP/s (of the median) counts "
        "4·L·T·d per head (half for causal) · % peak: the best repeat's rate against the GEMM "
        "peak (the best of 3) at the same thread count · × sdpa: torch SDPA's time / this "
        "peer's time in the same run (above 1 is faster) · K,V GB/s: "
        "bytes of K and V (read once per decoding step) / median time, % copy: the best "
        "repeat's against the copy bandwidth (the best of 5) · peak extra: resident memory "
        "above the inputs during one run, measured in a child process at the largest thread "
        "count · max |err|: against float64[/]"
    )


def _table(configs):
    """One rich table: a section per configuration, a row per peer."""
    from rich.table import Table

    decode = any(e["config"]["decode"] for e in configs)
    table = Table()
    cols = ["peer", "median", "GFLOP/s", "best", "% peak", "× sdpa"]
    cols += ["K,V GB/s", "% copy"] if decode else []
    for name in cols + ["peak extra", "max |err|"]:
        table.add_column(name, justify="left" if name == "peer" else "right", no_wrap=True)
    for entry in configs:
        table.add_row(f"[bold]{entry['config']['label']}[/]")
        for row in entry["results"]:
            if "skipped" in row:
                table.add_row(
                    row["peer"],
                    "[dim]skipped[/]",
                    *[""] * (len(cols) - 2),
                    f"[dim]needs {_mib(row['needs_bytes'])}[/]",
                    "",
                )
                continue
            gb = []
            if decode:
                gb = (
                    ["", ""]
                    if "kv_gb_per_s" not in row
                    else [
                        f"{row['kv_gb_per_s']:.1f}",
                        "—" if row["pct_copy"] is None else f"{row['pct_copy']:.0f}%",
                    ]
                )
            table.add_row(
                row["peer"],
                _ms(row["median_s"]),
                f"{row['gflops']:.1f}",
                _ms(row["best_s"]),
                f"{row['pct_peak']:.0f}%",
                "—" if row["vs_sdpa"] is None else f"{row['vs_sdpa']:.2f}",
                *gb,
                _mib(row.get("peak_extra_bytes")),
                f"{row['max_abs_err']:.1e}",
            )
        table.add_section()
    return table


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.3f} s"


def _mib(n) -> str:
    return "—" if n is None else f"{n / 2**20:.1f} MiB"


def machine() -> dict:
    """What the figures depend on: CPU, library versions, BLAS (threadpoolctl's view: its
    kernel ``architecture`` and thread count), torch's threads, the OpenBLAS pins."""
    import os

    torch_ok = have_torch()  # imported first, so its OpenMP library is listed below
    cpu = processor.current()
    info = {
        "cpu": cpu.describe(),
        "processor": {
            **cpu.key,
            "vector": cpu.vector,
            "vector_bits": cpu.vector_bits,
            "caches": {name: {"bytes": b, "shared_by": n} for name, (b, n) in cpu.caches.items()},
        },
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [
            {
                k: lib.get(k)
                for k in (
                    "user_api",
                    "internal_api",
                    "version",
                    "architecture",
                    "num_threads",
                    "filepath",
                )
            }
            for lib in threadpool_info()
        ]  # BLAS and OpenMP libraries loaded
    except ImportError:
        pass
    info["env"] = {
        k: os.environ.get(k)
        for k in (
            "OPENBLAS_CORETYPE",
            "OPENBLAS_L2_SIZE",
            "OPENBLAS_NUM_THREADS",
            "OMP_NUM_THREADS",
        )
    }
    if torch_ok:
        import torch

        info["torch"] = torch.__version__
    try:
        import numba

        info["numba"] = numba.__version__
    except ImportError:
        pass
    return info
