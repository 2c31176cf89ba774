"""``qkv heads``: a layers × heads grid naming what each head of a real model does."""

from __future__ import annotations

import click
import numpy as np

from qkv import models
from qkv.cli.common import FilePath, local_model_or_error, model_or_error
from qkv.cli.errors import CliError
from qkv.cli.taxonomy import HELP as TAXONOMY_HELP
from qkv.cli.taxonomy import show as show_taxonomy
from qkv.models import patterns

HELP = f"""A layers × heads grid naming what each attention head does on TEXT.

Each cell names the head's strongest pattern and the weight it gets, averaged over the
queries: "first .93" means that, on average, a query of this head puts 0.93 of its weight on
the first token ({patterns.THRESHOLD:g} or more names the pattern, 1.0 = all of it).

\b
{chr(10).join(patterns.legend()[1:])}

Tokens are shown with their edge spaces as ␣ ("␣cat" is " cat"), as qkv explain shows them.
--png draws every head's weights; masked cells (keys a query may not see) are grey.

\b
Examples:
  qkv heads --model minilm-l6 --text "The bank raised interest rates"
  qkv heads --model smollm2-135m --text "The cat sat on the mat" --png heads.png
  qkv heads --model smollm2-135m --taxonomy      previous-token, sink, induction … scores
  qkv heads --model ./my-llama --text "The cat sat"   a local transformers directory
  qkv heads --model HuggingFaceTB/SmolLM2-135M --taxonomy   a hub id (cache, else download)
"""


@click.command(help=HELP)
@click.option(
    "--model",
    "model_name",
    default="minilm-l6",
    show_default=True,
    metavar="NAME|DIR|ID",
    help=f"a bundled model ({', '.join(models.names())}), a "
    "local transformers model directory, or a hub id "
    "(owner/name: the local cache, else downloaded)",
)
@click.option(
    "--allow-pickle",
    is_flag=True,
    help="let --model DIR load pickle .bin weights (they can run code) when it has no .safetensors",
)
@click.option("--text", help="the sentence to run through the model")
@click.option(
    "--png",
    type=FilePath(writable=True),
    help="also draw every head's attention matrix into this PNG file (masked cells grey)",
)
@click.option("--taxonomy", is_flag=True, help=TAXONOMY_HELP)
def heads(model_name: str, allow_pickle: bool, text: str | None, png: str | None, taxonomy: bool):
    from qkv.explain.walkthrough import visible

    if not (text or taxonomy):
        raise CliError("--text is required (or --taxonomy, which needs no text)")
    m = (
        model_or_error(model_name)
        if model_name in models.NAMES
        else local_model_or_error(model_name, allow_pickle=allow_pickle)
    )
    if taxonomy:
        return show_taxonomy(m)
    try:
        m.encode(text, limit=models.MAX_TRACE_TOKENS)
        run = m.trace(text)
    except ValueError as e:
        raise CliError(f"--text: {e}") from None
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"{m.name}, {len(run.tokens)} tokens: " + " ".join(visible(t) for t in run.tokens),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
    )
    table.add_column("layer", justify="right", min_width=5)
    for h in range(m.n_heads):
        table.add_column(f"h{h}", justify="left", no_wrap=True)
    for layer, row in enumerate(patterns.grid(run.weights)):
        table.add_row(str(layer), *[f"{name} {_short(weight)}" for name, weight in row])
    console = Console(width=max(80, 12 * m.n_heads + 8), highlight=False)
    console.print(table)
    for line in patterns.legend():
        console.print(line, soft_wrap=True)
    if png:
        from qkv.models.plot import save_grid

        save_grid(run.weights, png, title=f"{m.name}: {text}", mask=_mask(run))
        click.echo(f"wrote {png}")


def _mask(run) -> np.ndarray:
    """True where a query may attend, for every kept layer: (n_layers, n_heads, L, L)."""
    shape = run.weights.shape[1:]  # (n_heads, L, L)
    return np.stack(
        [
            np.broadcast_to(
                True if (mask := run.layers[i].settings.get("mask")) is None else mask, shape
            )
            for i in sorted(run.layers)
        ]
    )


def _short(w: float) -> str:
    """0.42 -> '.42', 1.0 -> '1.0': fits a grid cell."""
    return "1.0" if w >= 0.995 else f"{w:.2f}".lstrip("0")
