"""``qkv lab``: check the tutorials' claims with numbers, and train the Mini-GPT."""

from __future__ import annotations

import json

import click

from qkv.cli.common import (
    FilePath,
    count_option,
    echo_sections,
    flag,
    format_option,
    png_option,
    require,
    seed_option,
)
from qkv.cli.errors import CliError

EXPERIMENTS = {
    "scaling": "qkv.lab.scaling",
    "symmetry": "qkv.lab.symmetry",
    "temperature": "qkv.lab.temperature",
    "cost": "qkv.lab.cost",
}


def cell(x) -> str:
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
            return f"{x:.2e}"
        return f"{x:.3f}" if abs(x) < 100 else f"{x:,.0f}"
    return str(x)


def result_sections(result):
    from qkv.explain.format import Table, section

    table = Table(tuple(result.columns), tuple(tuple(cell(x) for x in row) for row in result.rows))
    return [section(f"lab {result.name}", table, "", result.verdict)]


def save_png(result, path: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    result.plot(fig)
    try:
        fig.savefig(path)
    except OSError as e:
        raise CliError(f"cannot write the PNG to {path}: {e}") from None
    click.echo(f"wrote {path}", err=True)


def emit(result, fmt: str, png: str | None) -> None:
    if png:
        save_png(result, png)
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=1))
    else:
        echo_sections(result_sections(result), fmt)


def _experiment(name: str, doc: str):
    @click.command(name, help=doc)
    @seed_option("random seed (default_rng).")
    @png_option("also draw the figure to this PNG file.  Example: --png scaling.png")
    @format_option()
    def command(seed: int, png: str | None, fmt: str):
        import importlib

        module = importlib.import_module(EXPERIMENTS[name])
        emit(module.run(seed=seed), fmt, png)

    return command


@click.group("lab")
def lab():
    """Reproduce the tutorials' claims with numbers, a verdict line and a plot.

    \b
    Examples:
      qkv lab scaling --png scaling.png    std of q·k ≈ √d_k; saturation without ÷√d_k
      qkv lab symmetry                     W_Q = W_K gives symmetric, PSD scoring
      qkv lab temperature                  τ from 0.05 (argmax) to 10 (uniform)
      qkv lab cost                         memory of traced vs blocked attention as T doubles
      qkv lab train                        agreement past attractors, held-out pairs
    """


for _name, _doc in {
    "scaling": "Spread of q·k against √d_k (4…4096), and softmax saturation and vanishing "
    "gradients over 1024 keys without ÷√d_k.  Example: qkv lab scaling --png s.png",
    "symmetry": "Tied W_Q = W_K: symmetric scores and a PSD bilinear form; separate matrices "
    "lift both; tied W_K = W_V returns a mix of keys.  Example: qkv lab symmetry",
    "temperature": "Weights, entropy and effective number of tokens as τ goes 0.05 → 10 on "
    "the default scene.  Example: qkv lab temperature --format plain",
    "cost": "Time and memory of the traced and the blocked paths as T doubles: T² against T "
    "memory.  Example: qkv lab cost --png cost.png",
}.items():
    lab.add_command(_experiment(_name, _doc))


@lab.command("train")
@count_option("--steps", default=1200, help="optimizer steps (batches of 64 sentences).")
@seed_option("seed for weights, data and split.")
@click.option(
    "--out",
    default="minigpt.npz",
    show_default=True,
    type=FilePath(),
    help="where to save the checkpoint (.npz).",
)
@count_option(
    "--train-size", default=20_000, help="training sentences (every batch is drawn from these)."
)
@count_option(
    "--per-group",
    default=200,
    help="held-out sentences per group (attractor count × attractor numbers).",
)
@click.option(
    "--dump-corpus",
    type=FilePath(),
    default=None,
    metavar="DIR",
    help="write DIR/train.txt and DIR/heldout.txt, the exact sentences used.",
)
@flag(
    "--compare",
    "also train without ÷√d_k (scores 4× larger) and with τ = 4 (4× smaller), and "
    "compare gradient norms and losses.",
)
@png_option("draw the top head's weights on attractor sentences.")
@format_option()
def train_command(out: str, dump_corpus: str | None, png: str | None, fmt: str, **setup):
    """Train the Mini-GPT (d_model 64, 4 heads of 16, 2 layers, qkv's attention) on subject–verb
    agreement across attractors ("the key to the cabinets is"), and score it on (subject, verb)
    pairs never trained on, next to a no-attention model, the nearest-noun heuristic and the
    untrained model; ablate every head.

    \b
    Example:
      qkv lab train --out minigpt.npz --png head.png --dump-corpus corpus/
      qkv explain --checkpoint minigpt.npz --text "the key to the cabinets ___" --layer 1 --head 0
    """
    require("torch")
    from qkv.lab import agreement, minigpt, report

    try:
        # setup: steps, seed, train_size, per_group and compare, as the options above give them
        meta, runs = agreement.experiment(**setup, dump=dump_corpus, trainer=train_with_progress)
    except OSError as e:
        raise CliError(f"cannot write the corpus to {dump_corpus}: {e}") from None
    main = runs["Mini-GPT"]
    try:
        minigpt.save(out, main.params, main.config, meta)
    except OSError as e:
        raise CliError(f"cannot write the checkpoint to {out}: {e}") from None
    if png:
        try:
            report.agreement_png(out, png)
        except OSError as e:
            raise CliError(f"cannot write the PNG to {png}: {e}") from None
        click.echo(f"wrote {png}", err=True)
    result = report.training_result(meta, runs, out)
    if fmt == "json":
        click.echo(json.dumps({**result.to_dict(), "meta": meta, "checkpoint": out}, indent=1))
        return
    from qkv.explain.format import Table, section

    columns, rows = report.ablation_table(meta)
    heads = Table(tuple(columns), tuple(tuple(cell(x) for x in row) for row in rows))
    echo_sections(
        [
            *result_sections(result),
            section(
                "heads: weight from the verb's query, and accuracy with "
                f"{meta['ablation_group']} when ablated",
                heads,
            ),
        ],
        fmt,
    )


def train_with_progress(label, data, **kwargs):
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from qkv.lab import train

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=_stderr_console(), transient=False) as bar:
        task = bar.add_task(label, total=kwargs["steps"], info="")

        def progress(step, loss):
            bar.update(task, advance=1, info=f"loss {loss:.3f}")

        return train.train(data, progress=progress, **kwargs)


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)
