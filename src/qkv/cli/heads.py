"""``qkv heads``: a layers × heads grid naming what each head of a real model does."""

from __future__ import annotations

import json

import click
import numpy as np

from qkv import models
from qkv.cli.common import (
    any_model_or_error,
    json_option,
    model_options,
    png_option,
    text_options,
)
from qkv.cli.errors import CliError
from qkv.cli.taxonomy import HELP as TAXONOMY_HELP
from qkv.cli.taxonomy import show as show_taxonomy
from qkv.models import patterns

PNG_CELLS = 64  # past this many tokens --png max-pools each head to this many cells a side
SHOWN_TOKENS = 40  # tokens printed in the grid's title

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
  qkv heads --model smollm2-135m --text-file essay.txt --json    a long text, as JSON
  qkv heads --model smollm2-135m --taxonomy      previous-token, sink, induction … scores
  qkv heads --model ./my-llama --text "The cat sat"   a local transformers directory
  qkv heads --model HuggingFaceTB/SmolLM2-135M --taxonomy   a hub id (cache, else download)
"""


@click.command(help=HELP)
@model_options("model_name", default="minilm-l6", bundled=", ".join(models.names()))
@text_options("the text to run through the model (up to its context)")
@png_option(
    "also draw every head's attention matrix into this PNG file (masked cells grey; "
    f"past {PNG_CELLS} tokens each head max-pooled to {PNG_CELLS} × {PNG_CELLS} cells)",
)
@click.option("--taxonomy", is_flag=True, help=TAXONOMY_HELP)
@json_option
def heads(model_name, allow_pickle, text, png, taxonomy, as_json):
    from qkv.explain.tokens import visible

    if not (text or taxonomy):
        raise CliError("--text or --text-file is required (or --taxonomy, which needs no text)")
    m = any_model_or_error(model_name, allow_pickle=allow_pickle)
    if taxonomy:
        return show_taxonomy(m, as_json=as_json)
    try:
        m.encode(text)  # the model's context is the only limit
        run = m.trace(text)
    except ValueError as e:
        raise CliError(f"--text: {e}") from None
    scores = patterns.run_scores(run)  # per layer, per head: read block by block
    cells = [[patterns.label_of_scores(s) for s in row] for row in scores]
    if as_json:
        layers = [
            [{"head": h, "pattern": name, "weight": _json(w), "scores": {k: _json(v) for k, v in s.items()}}
             for h, ((name, w), s) in enumerate(zip(row, srow, strict=True))]
            for row, srow in zip(cells, scores, strict=True)
        ]  # fmt: skip
        click.echo(json.dumps({"model": m.name, "tokens": run.tokens, "layers": layers}))
    else:
        _print_grid(m, run, cells, visible)
    if png:
        from qkv.models.plot import save_grid

        weights, mask, note = _pictures(run)
        save_grid(weights, png, title=f"{m.name}: {_short_text(text)}{note}", mask=mask)
        click.echo(f"wrote {png}", err=as_json)


def _print_grid(m, run, cells, visible) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    words = " ".join(visible(t) for t in run.tokens[:SHOWN_TOKENS])
    more = f" … ({len(run.tokens)} tokens)" if len(run.tokens) > SHOWN_TOKENS else ""
    table = Table(
        title=f"{m.name}, {len(run.tokens)} tokens: {words}{more}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
    )
    table.add_column("layer", justify="right", min_width=5)
    for h in range(m.n_heads):
        table.add_column(f"h{h}", justify="left", no_wrap=True)
    for layer, row in enumerate(cells):
        table.add_row(str(layer), *[f"{name} {_short(weight)}" for name, weight in row])
    console = Console(width=max(80, 12 * m.n_heads + 8), highlight=False)
    console.print(table)
    for line in patterns.legend():
        console.print(line, soft_wrap=True)


def _pictures(run):
    """What --png draws: weights (n_layers, n_heads, n, n) and the mask (True = may attend),
    each head max-pooled to PNG_CELLS × PNG_CELLS cells past PNG_CELLS tokens (a cell is
    grey only when every key in it is masked)."""
    if len(run.tokens) <= PNG_CELLS:
        return run.weights, _mask(run), ""
    order = sorted(run.layers)
    weights, allowed = [], []
    for i in order:
        t = run.layers[i]
        pools = [t.pooled(PNG_CELLS, head=h) for h in range(t.settings["n_heads"])]
        weights.append([p.values for p in pools])
        mask = t.settings.get("mask")
        full = np.ones((t.settings["L"], t.settings["S"]), bool) if mask is None else mask
        full = np.broadcast_to(full, (len(pools), *full.shape[-2:]))
        edges = pools[0].rows[:-1], pools[0].keys[:-1]
        allowed.append([_any(full[h], *edges) for h in range(len(pools))])
    n = weights[0][0].shape
    note = f" (each head max-pooled to {n[0]} × {n[1]} cells)"
    return np.array(weights), np.array(allowed), note


def _any(mask: np.ndarray, rows, keys) -> np.ndarray:
    """True where some cell of a pooled block may attend."""
    m = np.maximum.reduceat(mask.astype(np.uint8), rows, axis=0)
    return np.maximum.reduceat(m, keys, axis=1) > 0


def _json(x: float) -> float | None:
    """A number for JSON: NaN (a pattern a one-token text cannot show) becomes null."""
    return None if np.isnan(x) else x


def _short_text(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "…"


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
