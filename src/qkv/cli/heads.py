"""``qkv heads``: a layers × heads grid naming what each head of a real model does."""

from __future__ import annotations

import click

from qkv import models
from qkv.cli.common import model_or_error
from qkv.cli.errors import CliError
from qkv.cli.taxonomy import HELP as TAXONOMY_HELP
from qkv.cli.taxonomy import show as show_taxonomy
from qkv.models import patterns


@click.command()
@click.option("--model", "model_name", default="minilm-l6", show_default=True,
              type=click.Choice(models.names()), help="which pretrained model")
@click.option("--text", help="the sentence to run through the model")
@click.option("--png", type=click.Path(dir_okay=False, writable=True),
              help="also draw every head's attention matrix into this PNG file")
@click.option("--taxonomy", is_flag=True, help=TAXONOMY_HELP)
def heads(model_name: str, text: str | None, png: str | None, taxonomy: bool):
    """A layers × heads grid naming what each attention head does on TEXT.

    Each cell names the head's strongest pattern (first/last/prev/self/next token, or mixed)
    with the mean weight it gets.

    \b
    Examples:
      qkv heads --model minilm-l6 --text "The bank raised interest rates"
      qkv heads --model smollm2-135m --text "The cat sat on the mat" --png heads.png
      qkv heads --model smollm2-135m --taxonomy
    """
    if taxonomy:
        return show_taxonomy(model_or_error(model_name))
    if not text:
        raise CliError("--text is required (or --taxonomy, which needs no text)")
    m = model_or_error(model_name)
    try:
        m.encode(text, limit=models.MAX_TRACE_TOKENS)
        run = m.trace(text)
    except ValueError as e:
        raise CliError(f"--text: {e}") from None
    from rich.console import Console
    from rich.table import Table

    from rich import box

    table = Table(title=f"{m.name}, {len(run.tokens)} tokens: " + " ".join(
        repr(t) if t != t.strip() or not t else t for t in run.tokens), title_justify="left",
        box=box.SIMPLE_HEAD, padding=(0, 1))
    table.add_column("layer", justify="right", min_width=5)
    for h in range(m.n_heads):
        table.add_column(f"h{h}", justify="left", no_wrap=True)
    for layer, row in enumerate(patterns.grid(run.weights)):
        table.add_row(str(layer), *[f"{name} {_short(weight)}" for name, weight in row])
    Console(width=max(80, 12 * m.n_heads + 8)).print(table)
    if png:
        from qkv.models.plot import save_grid

        save_grid(run.weights, png, title=f"{m.name}: {text}")
        click.echo(f"wrote {png}")


def _short(w: float) -> str:
    """0.42 -> '.42', 1.0 -> '1.0': fits a grid cell."""
    return "1.0" if w >= 0.995 else f"{w:.2f}".lstrip("0")
