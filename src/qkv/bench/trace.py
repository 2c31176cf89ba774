"""``qkv bench --trace``: what a lazy trace of a long text costs on SmolLM2, all 30 layers.

For each length (2,048 and 8,192 tokens by default) it measures, in this process:

- the bytes the trace holds (``run.nbytes``: x, q, k, v, out and the pre-RoPE projections per
  layer) against the bytes of x, q, k, v and out alone (target ≤ 1.5×);
- the peak memory growth while tracing (``tracemalloc``, which counts NumPy's arrays; a run of
  its own) against what the trace holds (target ≤ 2×);
- the traced forward's time ÷ the untraced forward's (``m.trace`` vs ``m.hidden_states``,
  the same text, alternating, the fastest of each; target ≤ 1.3×);
- the time to read one head's weights (``run.layer(i).head(h)["weights"]``, cache empty;
  target ≤ 100 ms at 2,048 tokens), median and largest over a few (layer, head) pairs.

Times are wall-clock and this process's CPU time, which a busy machine does not inflate.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc

from qkv.tiles import TileCache

TOKENS = (2048, 8192)
TARGETS = {"held": 1.5, "peak": 2.0, "time": 1.3, "read_ms": 100.0}
WORDS = (
    "the cat sat on a mat and then it ran to see what was in the big red box by the door".split()
)
READS = ((0, 0), (7, 4), (15, 8), (22, 1), (29, 5))  # (layer, head) pairs read


def repeats(n: int) -> int:
    """Forward passes of each kind at ``n`` tokens: three up to 2,048 tokens, one past that."""
    return 3 if n <= 2048 else 1


def text_of(model, n: int) -> str:
    """A text of exactly ``n`` tokens for ``model`` (each word here is one SmolLM2 token)."""
    text = "The" + "".join(" " + WORDS[i % len(WORDS)] for i in range(n - 1))
    got = len(model.encode(text)[0])
    if got != n:
        raise ValueError(f"the benchmark text has {got} tokens, expected {n}")
    return text


def measure(model, n: int, *, progress=lambda what: None) -> dict:
    """The four figures for one length ``n`` (see the module docstring); the forward passes
    alternate, untraced then traced, ``repeats(n)`` times each, and the fastest of each counts."""
    text = text_of(model, n)
    untraced, traced = [], []
    for r in range(repeats(n)):
        progress(f"{n} tokens: untraced forward ({r + 1} of {repeats(n)})")
        untraced.append(timed(model.hidden_states, text)[1])
        progress(f"{n} tokens: traced forward ({r + 1} of {repeats(n)})")
        run, took = timed(model.trace, text)
        traced.append(took)
    untraced, traced = min(untraced), min(traced)
    held = run.nbytes
    per_token = 2 * model.d_model + (model.n_heads + 2 * model.n_kv_heads) * model.d_head
    xqkvo = n * model.n_layers * per_token * model.dtype.itemsize
    reads = []
    for layer, head in READS:
        progress(f"{n} tokens: one head's weights (layer {layer}, head {head})")
        trace = run.layer(layer)
        trace.source.cache = TileCache(trace.source.cache.max_bytes)  # nothing read before
        reads.append(timed(lambda t, h: t.head(h)["weights"], trace, head)[1])
    del run
    progress(f"{n} tokens: traced forward, memory")
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        model.trace(text)  # the peak counts what it holds and what the forward pass needs
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return {
        "tokens": n,
        "held_bytes": held,
        "xqkvo_bytes": xqkvo,
        "held_ratio": held / xqkvo,
        "peak_growth_bytes": peak,
        "peak_ratio": peak / held,
        "untraced_s": untraced,  # (wall, CPU) seconds
        "traced_s": traced,
        "time_ratio": traced[0] / untraced[0],
        "cpu_time_ratio": traced[1] / untraced[1],
        "head_read_ms": {
            "median": 1e3 * statistics.median(w for w, _ in reads),
            "max": 1e3 * max(w for w, _ in reads),
            "median_cpu": 1e3 * statistics.median(c for _, c in reads),
            "reads": len(reads),
        },
    }


def timed(f, *args):
    """(f(*args), (wall seconds, CPU seconds of this process)): the CPU time stays meaningful
    on a machine other programs are busy on."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = f(*args)
    return out, (time.perf_counter() - wall, time.process_time() - cpu)


def run_trace(tokens=TOKENS, *, show_progress: bool = True) -> dict:
    """Every length in ``tokens`` on SmolLM2 (float32, all layers): the report ``--json`` prints."""
    from rich.console import Console
    from rich.status import Status

    from qkv import models
    from qkv.bench.run import machine

    if not tokens or min(tokens) < 1:
        raise ValueError(f"expected positive token counts, got {list(tokens)}")
    model = models.load("smollm2-135m")
    if max(tokens) > model.max_tokens:
        raise ValueError(
            f"at most {model.max_tokens} tokens (the model's context), got {max(tokens)}"
        )
    model.hidden_states(text_of(model, 64))  # compiles the kernels before anything is timed
    rows = []
    status = Status("", console=Console(stderr=True))
    if show_progress:
        status.start()
    try:
        for n in tokens:
            rows.append(measure(model, n, progress=status.update))
    finally:
        status.stop()
    return {
        "machine": machine(),
        "model": model.name,
        "layers": model.n_layers,
        "targets": TARGETS,
        "rows": rows,
    }


def render_trace(report: dict, console) -> None:
    """The report as a table, each figure beside its target."""
    from rich.table import Table

    from qkv.bench.run import header

    t = TARGETS
    console.print("[bold]qkv bench --trace[/] · " + "\n".join(header(report["machine"])))
    table = Table(
        title=f"{report['model']}, all {report['layers']} layers, float32: a lazy trace",
        title_justify="left",
    )
    for name in (
        "tokens",
        "holds",
        "x,q,k,v,out",
        f"holds ÷ x,q,k,v,out (≤ {t['held']})",
        "peak growth",
        f"peak ÷ holds (≤ {t['peak']})",
        "untraced (wall / CPU)",
        "traced (wall / CPU)",
        f"traced ÷ untraced, wall / CPU (≤ {t['time']})",
        f"one head's weights: median / max wall, median CPU (≤ {t['read_ms']:g} ms at 2,048)",
    ):
        table.add_column(name, justify="right")
    for r in report["rows"]:
        read = r["head_read_ms"]
        table.add_row(
            f"{r['tokens']:,}",
            f"{r['held_bytes'] / 1e6:,.0f} MB",
            f"{r['xqkvo_bytes'] / 1e6:,.0f} MB",
            f"{r['held_ratio']:.2f}×",
            f"{r['peak_growth_bytes'] / 1e6:,.0f} MB",
            f"{r['peak_ratio']:.2f}×",
            "{:.1f} / {:.1f} s".format(*r["untraced_s"]),
            "{:.1f} / {:.1f} s".format(*r["traced_s"]),
            f"{r['time_ratio']:.2f}× / {r['cpu_time_ratio']:.2f}×",
            f"{read['median']:.0f} / {read['max']:.0f} / {read['median_cpu']:.0f} ms",
        )
    console.print(table)
    console.print(
        "holds: run.nbytes (x, q, k, v, out and q, k before RoPE, per layer); peak growth: "
        "tracemalloc's peak while m.trace(text) runs; times: the fastest of 3 alternating runs "
        "each up to 2,048 tokens, one run past that; CPU: this process's CPU time (all its "
        "threads), which other programs on the machine do not inflate; the text is built of "
        "one-token words"
    )
