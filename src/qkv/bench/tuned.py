"""``qkv bench --tune``: the tile sizes each kernel uses on this processor, and why
(``kernels/tuning.py`` measures them on first use and keeps them in the user's cache)."""

from __future__ import annotations

from qkv.kernels import blocked, decode_blas, fused, processor, tuning

WHAT = {  # what each kernel's tiles are for
    "strips": " · float32 tiles without a mask, bias or softcap: query rows per tile (fewer"
    " where two or more workers would get under 4 tiles each); its keys come in blocks of"
    " block_k",
    "fused": " · the tiles on BLAS's products (a mask, a bias, a softcap, float64)",
    "decode": " · one-token steps whose rows see every key of a cache of"
    f" {decode_blas.DECODE_BLAS_KEYS} keys or more, each K/V head's rows contiguous: the fused"
    " kernel's compiled loop or BLAS's products",
    "blocked": " · the NumPy kernel",
}


def report(*, retune: bool = False) -> dict:
    """What the tuner chose for each kernel here (measuring now where nothing is cached;
    ``retune``: forget the cache first)."""
    if retune:
        tuning.reset()
    kernels = (*fused.tuned(), blocked.TUNED) if fused.available() else (blocked.TUNED,)
    chosen = []
    for kernel in kernels:
        c, default = tuning.choice(kernel), kernel.built_in
        chosen.append(
            {
                "kernel": kernel.name,
                "problem": kernel.measured_on,
                "tiles": _entry(kernel, c.tiles),
                "column": "choice" if kernel.describe else "block_q × block_k",
                "source": c.source,
                "spent_s": c.spent_s,
                "note": c.note,
                "default": _entry(kernel, default),
                "default_cpu_s": dict(c.table).get(default),
                "table": [{**_entry(kernel, t), "cpu_s": s} for t, s in c.table],
            }
        )
    return {
        "processor": processor.current().describe(),
        "cache": str(tuning.cache_path()),
        "tuning": "on" if tuning.enabled() else "off (QKV_TUNE=off)",
        "problem": tuning.problem_text(),
        "kernels": chosen,
    }


def render(report_: dict, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    console.print(f"[bold]qkv bench --tune[/] · {report_['processor']}")
    console.print(f"tile cache: {escape(report_['cache'])} · tuning {report_['tuning']}")
    for k in report_["kernels"]:
        t = k["tiles"]
        spent = f" in {k['spent_s']:.1f} s" if k["source"] != "cache" and k["table"] else ""
        tiles = k["column"] == "block_q × block_k"  # else a choice in its own words
        console.print(
            f"[bold]{k['kernel']}[/]: {'block_q × block_k = ' if tiles else ''}{t['label']} "
            f"({k['source']}{spent}){WHAT.get(k['kernel'], '')}"
        )
        if k["note"]:
            console.print(f"  [yellow]{escape(k['note'])}[/]")
        built_in = f"{'tiles ' if tiles else ''}{k['default']['label']}"
        if not k["table"]:
            console.print(f"  the built-in {built_in} (nothing measured)")
            continue
        best = k["table"][0]["cpu_s"]
        why = f"  why: the least CPU time on {k['problem']}"
        if k["default_cpu_s"] is not None:
            slower = 100 * (k["default_cpu_s"] / best - 1)
            why += f"; the built-in {k['default']['label']} took {slower:+.0f}%"
        console.print(why)
        table = Table(box=None, padding=(0, 2))
        for column in (k["column"], "CPU ms", "vs chosen"):
            table.add_column(column, justify="right")
        for row in k["table"]:
            table.add_row(
                row["label"],
                f"{row['cpu_s'] * 1e3:.1f}",
                f"{100 * (row['cpu_s'] / best - 1):+.1f}%",
            )
        console.print(table)
    console.print(
        "[dim]candidates dropped after the first round show that round's time; "
        "qkv bench --retune measures again[/]"
    )


def _entry(kernel: tuning.Kernel, t: tuning.Tiles) -> dict:
    """Tiles as the report gives them: sizes, and the choice in words."""
    return {"block_q": t.block_q, "block_k": t.block_k, "label": kernel.label(t)}
