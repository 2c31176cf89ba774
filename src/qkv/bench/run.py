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

QUICK = {"T": [256], "heads": 2, "d": 32, "min_time": 0.02, "gemm_n": 1024, "settle": 0.02}


def run(configs, chosen, *, min_time, max_memory, memory, gemm_n, settle=0.25,
        show_progress=True) -> dict:
    """Measure every configuration; return the report (as ``--json`` prints it)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    steps = 1 + sum(2 * len(chosen) + memory for _ in configs)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                        console=err, transient=True, disable=not show_progress)
    results, jobs = [], []
    with progress:
        task = progress.add_task("GEMM peak", total=steps)
        peak = peers_.gemm_peak(gemm_n)
        progress.advance(task)
        for cfg in configs:
            progress.update(task, description=cfg.label)
            entry, ran = _measure(cfg, chosen, peak, min_time, max_memory, settle,
                                  lambda: progress.advance(task))
            results.append(entry)
            jobs.append((cfg, ran))
        if memory:
            progress.update(task, description="peak memory (child process)")
            for entry, (_, ran), mem in zip(results, jobs, peers_.measure_memory(jobs)):
                for row in entry["results"]:
                    if row["peer"] in ran:
                        row["peak_extra_bytes"] = mem.get(row["peer"])
                if "error" in mem:
                    entry["memory_error"] = mem["error"]
                progress.advance(task)
    return {"machine": _machine(), "gemm": {"n": gemm_n, "gflops": peak}, "configs": results}


def _measure(cfg, chosen, peak, min_time, max_memory, settle, step) -> tuple[dict, list]:
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
        rows[p].update(median_s=t, gflops=gflops, pct_peak=100 * gflops / peak,
                       vs_sdpa=None if sdpa is None else sdpa / t,
                       max_abs_err=peers_.max_error(outputs[p], cfg, expected))
    config = {**cfg.__dict__, "label": cfg.label, "L": cfg.L, "flops": cfg.flops}
    return {"config": config, "results": [rows[p] for p in chosen]}, list(runners)


def render(report: dict, console) -> None:
    """The report as a rich table: one section per configuration, one row per peer."""
    gemm = report["gemm"]
    console.print(f"[bold]qkv bench[/] · {report['machine']['cpu']} · NumPy float32 GEMM peak "
                  f"{gemm['gflops']:.1f} GFLOP/s (matmul {gemm['n']}³)")
    from rich.table import Table

    table = Table()
    for name in ("peer", "median", "GFLOP/s", "% peak", "× sdpa", "peak extra", "max |err|"):
        table.add_column(name, justify="left" if name == "peer" else "right", no_wrap=True)
    for entry in report["configs"]:
        table.add_row(f"[bold]{entry['config']['label']}[/]")
        for row in entry["results"]:
            if "skipped" in row:
                table.add_row(row["peer"], "[dim]skipped[/]", "", "", "",
                              f"[dim]needs {_mib(row['needs_bytes'])}[/]", "")
                continue
            table.add_row(row["peer"], _ms(row["median_s"]), f"{row['gflops']:.1f}",
                          f"{row['pct_peak']:.0f}%",
                          "—" if row["vs_sdpa"] is None else f"{row['vs_sdpa']:.2f}",
                          _mib(row.get("peak_extra_bytes")), f"{row['max_abs_err']:.1e}")
        table.add_section()
    console.print(table)
    console.print("[dim]median of repeats after a warm-up · GFLOP/s counts 4·L·T·d per head "
                  "(half for causal) · × sdpa: torch SDPA's time / this peer's time (above 1 is "
                  "faster) · peak extra: resident memory above the inputs during one run, "
                  "measured in a child process · max |err|: against float64[/]")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.3f} s"


def _mib(n) -> str:
    return "—" if n is None else f"{n / 2**20:.1f} MiB"


def have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _machine() -> dict:
    info = {"cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
            "numpy": np.__version__}
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        info["cpu"] = f"{len(names)}× {names[0]}" if names else info["cpu"]
    except OSError:
        pass
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [{k: lib.get(k) for k in ("internal_api", "version", "architecture",
                                                  "num_threads")} for lib in threadpool_info()]
    except ImportError:
        pass
    if have_torch():
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    return info

