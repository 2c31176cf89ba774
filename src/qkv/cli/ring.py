"""``qkv ring``: ring attention over N local processes, checked against one process."""

from __future__ import annotations

import json

import click

from qkv.cli.common import (
    count_option,
    echo_sections,
    flag,
    format_option,
    head_shape_options,
    number_option,
)
from qkv.cli.errors import CliError


@click.command("ring")
@count_option(
    "--world-size",
    "-n",
    default=2,
    most=64,
    help="processes in the ring (local, gloo on 127.0.0.1).",
)
@count_option(
    "--T", "T", default=4096, help="sequence length, split in contiguous slices over the ranks."
)
@head_shape_options(heads=1)
@flag("--causal", "causal attention: blocks after a rank's queries are skipped.")
@click.option(
    "--dtype", type=click.Choice(["float32", "float64"]), default="float32", show_default=True
)
@flag("--grad", "also run backward and compare dq, dk, dv.")
@number_option(
    "--timeout",
    default=120.0,
    above=0,
    help="seconds a rank waits for its neighbours before giving up.",
)
@format_option()
def ring(world_size, T, heads, d, causal, dtype, grad, timeout, fmt):
    """Run ring attention over N local processes and check it against one process.

    Prints the max abs difference from the float64 single-process result, the time of the ring
    and of one process, the bytes each rank sent (against (N−1)/N of K and V) and each rank's
    peak memory growth. Exits with status 1 when the difference exceeds the tolerance (float64:
    1e-10; float32: twice the float32 single-process error plus a bound on the rounding the
    ring's merges add: qkv.distributed.check.float32_tolerance).

    \b
    Examples:
      qkv ring --world-size 2 --T 4096
      qkv ring -n 4 --T 1001 --causal --dtype float64 --grad
    """
    from qkv.distributed import check, launch

    setup = check.Setup(T=T, heads=heads, d=d, causal=causal, dtype=dtype, grad=grad)
    try:
        results = launch.run(check.worker, world_size, setup, timeout_s=timeout)
        single = launch.run(check.worker, 1, setup, timeout_s=timeout)[0]
    except RuntimeError as e:
        raise CliError(str(e)) from None
    report = check.compare(results, setup)
    itemsize = 8 if dtype == "float64" else 4
    kv_bytes = 2 * heads * T * d * itemsize
    report.update(
        {
            "single_process_seconds": single["seconds"],
            "single_process_peak_growth_bytes": single["peak_growth_bytes"],
            "kv_bytes": kv_bytes,
            "expected_bytes_sent": kv_bytes * (world_size - 1) / world_size,
        }
    )
    if fmt == "json":
        click.echo(json.dumps(report, indent=1))
    else:
        echo_sections(_sections(report, results), fmt)
    if not report["ok"]:
        raise SystemExit(1)


def _sections(report, results):
    from qkv.explain.format import Table, section

    mib = 2**20
    rows = tuple(
        (
            str(r["rank"]),
            _positions(r["start"], r["stop"]),
            f"{r['seconds']:.3f}",
            f"{r.get('bytes_sent', 0) / mib:.2f}",
            f"{r['peak_growth_bytes'] / mib:.1f}",
        )
        for r in results
    )
    table = Table(("rank", "positions", "seconds", "MiB sent", "peak growth MiB"), rows)
    s = report["setup"]
    verdict = "OK" if report["ok"] else "FAILED"
    lines = [
        f"max |ring − single process (float64)| = {report['max_abs_diff']:.3g} "
        f"(tolerance {report['tolerance']:.3g}): {verdict}",
        f"time: ring {report['seconds']:.3f} s, one process "
        f"{report['single_process_seconds']:.3f} s "
        f"({report['seconds'] / max(report['single_process_seconds'], 1e-12):.2f}×)",
        f"sent per rank ≈ (N−1)/N of K and V = {report['expected_bytes_sent'] / mib:.2f} MiB "
        f"(K and V: {report['kv_bytes'] / mib:.2f} MiB)",
        f"one process grew by {report['single_process_peak_growth_bytes'] / mib:.1f} MiB",
    ]
    if "grad_max_abs_diff" in report:
        dq, dk, dv = report["grad_max_abs_diff"]
        lines.append(f"gradients: max |Δdq| = {dq:.3g}, |Δdk| = {dk:.3g}, |Δdv| = {dv:.3g}")
    title = (
        f"ring attention: N = {report['world_size']}, T = {s['T']}, heads = {s['heads']}, "
        f"d = {s['d']}, {'causal' if s['causal'] else 'full'}, {s['dtype']}"
    )
    return [section(title, table, *lines)]


def _positions(start: int, stop: int) -> str:
    """'0–9', or 'none' for a rank with an empty slice (T < N)."""
    return f"{start}–{stop - 1}" if stop > start else "none"
