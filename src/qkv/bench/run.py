"""The benchmark behind ``qkv bench``: exact attention side by side with its peers here.

For each configuration every peer (``qkv.bench.peers.PEERS``) runs on the same float32 inputs
in this process: a warm-up, then repeats interleaved across peers; the median is reported with
GFLOP/s (4·L·T·d per head, half for causal prefill), % of NumPy's float32 GEMM peak, throughput
relative to torch SDPA, peak extra memory (one child process per configuration) and the largest
error against a float64 reference (on up to 64 query rows per head).
"""

from __future__ import annotations

import platform

import numpy as np

from qkv.bench import peers as peers_
from qkv.bench.peers import have_torch

QUICK = {
    "T": [256],
    "heads": 2,
    "d": 32,
    "min_time": 0.02,
    "gemm_n": 1024,
    "settle": 0.02,
    "copy_bytes": 1 << 24,
}


def run(
    configs,
    chosen,
    *,
    min_time,
    max_memory,
    memory,
    gemm_n,
    settle=0.25,
    show_progress=True,
    skipped=None,
    copy_bytes=1 << 28,
) -> dict:
    """Measure every configuration; return the report (as ``--json`` prints it)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    steps = 1 + sum(2 * len(chosen) + memory for _ in configs)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not show_progress,
    )
    results, jobs = [], []
    with progress:
        task = progress.add_task("GEMM peak", total=steps)
        peak = peers_.gemm_peak(gemm_n)
        copy = peers_.copy_bandwidth(copy_bytes) if any(c.decode for c in configs) else None
        progress.advance(task)
        for cfg in configs:
            progress.update(task, description=cfg.label)
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
        if memory:
            progress.update(task, description="peak memory (child process)")
            for entry, (_, ran), mem in zip(
                results, jobs, peers_.measure_memory(jobs), strict=False
            ):
                for row in entry["results"]:
                    if row["peer"] in ran:
                        row["peak_extra_bytes"] = mem.get(row["peer"])
                if "error" in mem:
                    entry["memory_error"] = mem["error"]
                progress.advance(task)
    return {
        "machine": machine(),
        "gemm": {"n": gemm_n, "gflops": peak},
        "copy": None if copy is None else {"bytes": copy_bytes, "gb_per_s": copy},
        "skipped_peers": dict(skipped or {}),
        "configs": results,
    }


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
    times, outputs = peers_.time_peers(runners, min_time=min_time, settle=settle, on_step=step)
    sdpa = times.get("torch sdpa")
    for p, t in times.items():
        gflops = cfg.flops / t / 1e9
        rows[p].update(
            median_s=t,
            gflops=gflops,
            pct_peak=100 * gflops / peak,
            vs_sdpa=None if sdpa is None else sdpa / t,
            max_abs_err=peers_.max_error(outputs[p], cfg, expected),
        )
        if cfg.decode:  # memory speed: K and V read once per step, against a plain copy
            gbs = cfg.kv_bytes / t / 1e9
            rows[p].update(kv_gb_per_s=gbs, pct_copy=None if copy is None else 100 * gbs / copy)
    config = {**cfg.__dict__, "label": cfg.label, "L": cfg.L, "flops": cfg.flops}
    return {"config": config, "results": [rows[p] for p in chosen]}, list(runners)


def header(machine_: dict) -> list[str]:
    """Lines naming the machine: CPU, BLAS library, the kernel it runs, thread counts."""
    lines = [
        f"{machine_['cpu']} · Python {machine_['python']} · NumPy {machine_['numpy']}"
        + (
            f" · torch {machine_['torch']} ({machine_['torch_threads']} threads)"
            if "torch" in machine_
            else " · torch not installed"
        )
        + (f" · numba {machine_['numba']}" if "numba" in machine_ else "")
    ]
    for lib in machine_.get("blas", []):
        kernel = f", kernel {lib['architecture']}" if lib.get("architecture") else ""
        where = lib["filepath"].rsplit("/", 1)[-1] if lib.get("filepath") else "?"
        lines.append(
            f"{lib.get('user_api', 'blas')}: {lib['internal_api']} {lib['version'] or ''}"
            f"{kernel}, {lib['num_threads']} threads ({where})"
        )
    pins = {k: v for k, v in machine_.get("env", {}).items() if v is not None}
    if pins:
        lines.append("environment: " + ", ".join(f"{k}={v}" for k, v in pins.items()))
    return lines


def render(report: dict, console) -> None:
    """The report as a rich table: one section per configuration, one row per peer."""
    gemm = report["gemm"]
    console.print("[bold]qkv bench[/] · " + "\n".join(header(report["machine"])))
    line = f"NumPy float32 GEMM peak {gemm['gflops']:.1f} GFLOP/s (matmul {gemm['n']}³)"
    if report.get("copy"):
        line += (
            f" · copy bandwidth {report['copy']['gb_per_s']:.1f} GB/s (np.copyto of "
            f"{_mib(report['copy']['bytes'])}, read + write)"
        )
    console.print(line)
    from rich.markup import escape
    from rich.table import Table

    decode = any(e["config"]["decode"] for e in report["configs"])
    table = Table()
    cols = ["peer", "median", "GFLOP/s", "% peak", "× sdpa"] + ["K,V GB/s", "% copy"] * decode
    for name in cols + ["peak extra", "max |err|"]:
        table.add_column(name, justify="left" if name == "peer" else "right", no_wrap=True)
    for entry in report["configs"]:
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
                f"{row['pct_peak']:.0f}%",
                "—" if row["vs_sdpa"] is None else f"{row['vs_sdpa']:.2f}",
                *gb,
                _mib(row.get("peak_extra_bytes")),
                f"{row['max_abs_err']:.1e}",
            )
        table.add_section()
    console.print(table)
    for peer, why in report.get("skipped_peers", {}).items():
        console.print(f"[yellow]skipped {peer}[/]: {escape(why)}")  # why holds [extras]
    console.print(
        "[dim]median of repeats after a warm-up · GFLOP/s counts 4·L·T·d per head "
        "(half for causal) · × sdpa: torch SDPA's time / this peer's time (above 1 is "
        "faster) · K,V GB/s: bytes of K and V (read once per decoding step) / time · "
        "peak extra: resident memory above the inputs during one run, "
        "measured in a child process · max |err|: against float64[/]"
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.3f} s"


def _mib(n) -> str:
    return "—" if n is None else f"{n / 2**20:.1f} MiB"


def machine() -> dict:
    """What the figures depend on: CPU, library versions, BLAS (threadpoolctl's view: its
    kernel ``architecture`` and thread count), torch's threads, the OpenBLAS pins."""
    import os

    torch_ok = have_torch()  # imported first, so its OpenMP library is listed below
    info = {
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        info["cpu"] = f"{len(names)}× {names[0]}" if names else info["cpu"]
    except OSError:
        pass
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
        info["torch_threads"] = torch.get_num_threads()
    try:
        import numba

        info["numba"] = numba.__version__
    except ImportError:
        pass
    return info
