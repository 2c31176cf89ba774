"""``qkv bench --tune``: the tile sizes each kernel uses on this processor, and why
(``kernels/tuning.py`` measures them on first use and keeps them in the user's cache)."""

from __future__ import annotations

from collections.abc import Callable

from qkv.kernels import blocked, fused, processor, tuning


def report(*, retune: bool = False) -> dict:
    """What the tuner chose for each kernel here (measuring now where nothing is cached;
    ``retune``: forget the cache first)."""
    if retune:
        tuning.reset()
    kernels: list[tuple[str, Callable]] = [("blocked", blocked.blocked_attention)]
    strips = None
    if fused.available():
        from qkv.kernels import strips_jit

        kernels.insert(0, ("fused", fused.on_blas_tiles))
        strips = {"block_q": strips_jit.STRIP_ROWS, "block_k": strips_jit.STRIP_KEYS}
    chosen = []
    for name, run in kernels:
        c = tuning.choice(name, run)
        default = dict(c.table).get(tuning.DEFAULT)
        chosen.append(
            {
                "kernel": name,
                "tiles": {"block_q": c.tiles.block_q, "block_k": c.tiles.block_k},
                "source": c.source,
                "spent_s": c.spent_s,
                "note": c.note,
                "default_cpu_s": default,
                "table": [
                    {"block_q": t.block_q, "block_k": t.block_k, "cpu_s": s} for t, s in c.table
                ],
            }
        )
    return {
        "processor": processor.current().describe(),
        "cache": str(tuning.cache_path()),
        "tuning": "on" if tuning.enabled() else "off (QKV_TUNE=off)",
        "problem": tuning.problem_text(),
        "default": str(tuning.DEFAULT),
        "kernels": chosen,
        "strips": strips,  # the strip kernel's own tiles (not tuned); None without numba
    }


def render(report_: dict, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    console.print(f"[bold]qkv bench --tune[/] · {report_['processor']}")
    console.print(f"tile cache: {escape(report_['cache'])} · tuning {report_['tuning']}")
    for k in report_["kernels"]:
        t = k["tiles"]
        spent = f" in {k['spent_s']:.1f} s" if k["source"] != "cache" and k["table"] else ""
        console.print(
            f"[bold]{k['kernel']}[/]: block_q × block_k = {t['block_q']}×{t['block_k']} "
            f"({k['source']}{spent})"
        )
        if k["note"]:
            console.print(f"  [yellow]{escape(k['note'])}[/]")
        if not k["table"]:
            console.print(f"  the built-in tiles {report_['default']} (nothing measured)")
            continue
        best = k["table"][0]["cpu_s"]
        why = f"  why: the least CPU time on {report_['problem']}"
        if k["default_cpu_s"] is not None:
            why += (
                f"; the built-in {report_['default']} took "
                f"{100 * (k['default_cpu_s'] / best - 1):+.0f}%"
            )
        console.print(why)
        table = Table(box=None, padding=(0, 2))
        for name in ("block_q × block_k", "CPU ms", "vs chosen"):
            table.add_column(name, justify="right")
        for row in k["table"]:
            table.add_row(
                f"{row['block_q']}×{row['block_k']}",
                f"{row['cpu_s'] * 1e3:.1f}",
                f"{100 * (row['cpu_s'] / best - 1):+.1f}%",
            )
        console.print(table)
    if report_.get("strips"):
        t = report_["strips"]
        console.print(
            f"[bold]fused, float32 without a mask, bias or softcap[/]: the strip kernel's own "
            f"tiles, up to {t['block_q']} query rows and blocks of {t['block_k']} keys (not tuned: "
            "fewer rows where the workers would get under 4 tiles each)"
        )
    console.print(
        "[dim]candidates dropped after the first round show that round's time; "
        "qkv bench --retune measures again[/]"
    )
