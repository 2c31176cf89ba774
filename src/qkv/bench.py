"""``qkv bench``: exact attention side by side with its peers on this machine.

For each configuration every peer (``qkv.bench_peers.PEERS``) runs on the same float32 inputs
in this process: a warm-up, then repeats interleaved across peers; the median is reported with
GFLOP/s (4·L·T·d per head, half for causal prefill), % of NumPy's float32 GEMM peak, throughput
relative to torch SDPA, peak extra memory (one child process per configuration) and the largest
error against a float64 reference (on up to 64 query rows per head).
"""

from __future__ import annotations

import json
import platform
import shutil
import sys

import click
import numpy as np

from qkv import bench_peers as peers_
from qkv.bench_peers import PEERS, TORCH_PEERS, Config

QUICK = {"T": [256], "heads": 2, "d": 32, "min_time": 0.02, "gemm_n": 1024, "settle": 0.02}


def _sizes(_ctx, _param, value: str) -> list[int]:
    try:
        sizes = [int(t) for t in value.split(",") if t.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers like 1024,4096, got "
                                 f"{value!r}") from None
    if not sizes or min(sizes) < 1:
        raise click.BadParameter(f"expected positive sizes, got {value!r}")
    return sizes


@click.command(name="bench")
@click.option("--T", "T", default="1024,4096,16384", callback=_sizes, show_default=True,
              help="Sequence lengths (cache lengths with --decode), comma-separated.")
@click.option("--heads", default=12, show_default=True, type=click.IntRange(1))
@click.option("--d", "d", default=64, show_default=True, type=click.IntRange(1),
              help="Features per head (d_k = d_v).")
@click.option("--causal", is_flag=True, help="Also run causal prefill.")
@click.option("--decode", is_flag=True, help="Also run one-token decode steps against a cache of "
              "T keys.")
@click.option("--skip-full", is_flag=True, help="Leave out full (non-causal) prefill.")
@click.option("--quick", is_flag=True, help="Tiny sizes, every kind, short timings (a smoke "
              "test that takes seconds).")
@click.option("--peers", "peer_list", default=",".join(PEERS), show_default=True,
              help="Which peers to run, comma-separated.")
@click.option("--min-time", default=1.0, show_default=True, type=click.FloatRange(0),
              help="Seconds of repeats per peer per configuration (at least 3 repeats).")
@click.option("--max-memory", default=6.0, show_default=True, type=click.FloatRange(0),
              help="GiB: peers whose score matrices would need more are skipped.")
@click.option("--gemm-size", default=4096, show_default=True, type=click.IntRange(1),
              help="n for the n³ float32 matmul that sets the GEMM peak.")
@click.option("--no-memory", is_flag=True, help="Skip the child-process memory measurement.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def bench(T, heads, d, causal, decode, skip_full, quick, peer_list, min_time, max_memory,
          gemm_size, no_memory, as_json):
    """Time exact attention: qkv blocked and reference, naive NumPy, torch SDPA and math.

    \b
    Examples:
      qkv bench --quick                       a few seconds, every kind of run
      qkv bench --T 4096,16384 --causal --decode
      qkv bench --T 4096 --json > bench.json
    """
    gemm_n, settle = gemm_size, 0.25
    if quick:
        T, heads, d, min_time, gemm_n, settle = (
            QUICK[k] for k in ("T", "heads", "d", "min_time", "gemm_n", "settle"))
        causal = decode = True
    kinds = [(False, False)] * (not skip_full) + [(True, False)] * causal + [(False, True)] * decode
    if not kinds:
        raise click.UsageError("nothing to run: --skip-full needs --causal or --decode")
    configs = [Config(t, heads, d, c, dec) for c, dec in kinds for t in T]
    chosen = [p.strip() for p in peer_list.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PEERS]
    if unknown:
        raise click.BadParameter(f"unknown peers {unknown}; expected some of {list(PEERS)}",
                                 param_hint="--peers")
    if not _have_torch():
        chosen = [p for p in chosen if p not in TORCH_PEERS]
    report = run(configs, chosen, min_time=min_time, max_memory=max_memory * 2**30,
                 memory=not no_memory, gemm_n=gemm_n, settle=settle, show_progress=not as_json)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        from rich.console import Console

        render(report, Console(width=max(100, shutil.get_terminal_size().columns)))


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


def _have_torch() -> bool:
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
    if _have_torch():
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    return info


if __name__ == "__main__":
    sys.exit(bench())
