"""``qkv export``: the simulator's panels for one scene or one model run, as a single HTML file
that opens offline (scripts, styles and every precomputed number inline); past
``views.long_text.PANEL_TOKENS`` tokens, up to the model's context, each head's pooled
overview and each query's top keys (``notebook/export_long.py``)."""

from __future__ import annotations

import contextlib
import sys

import click

from qkv import models
from qkv.cli.common import TAU, model_or_error, text_options, trace_file_options
from qkv.cli.errors import CliError
from qkv.explain import scenes


@click.command()
@click.option(
    "--preset",
    default=None,
    type=click.Choice(scenes.names()),
    help="a built-in scene (qkv presets lists them); the default scene without --model",
)
@click.option(
    "--model",
    "model_name",
    default=None,
    type=click.Choice(models.names()),
    help="a pretrained model to run --text through instead of a scene",
)
@text_options("the text for --model (up to the model's context)")
@click.option(
    "--select",
    default=None,
    help="the query token the file opens on (text or index; default: the scene's, or "
    "the last token)",
)
@click.option(
    "--temperature",
    "temperatures",
    type=TAU,
    multiple=True,
    help="a τ to precompute (repeat for several; default: 1). Only these are offered.",
)
@trace_file_options("HTML", "with --model: a layer to include (repeat; default: every layer)")
def export(preset, model_name, text, select, temperatures, layers, output):
    """Write the interactive panels as one self-contained HTML file.

    Every query token × head (× layer) is computed now, at each --temperature; the file keeps
    the token, head and layer selection offline, in any browser. A longer text than the panels
    print (32 tokens) gets the zooming heatmap instead, at one τ: every head max-pooled to fit a
    screen and each query's heaviest keys (at most 20 MB; the file says what it leaves out).

    \b
    Examples:
      qkv export --preset bank --select bank -o bank.html
      qkv export --preset two-heads --temperature 0.5 --temperature 1 --temperature 2 -o heads.html
      qkv export --model minilm-l6 --text "The bank raised its rates" -o run.html
      qkv export --model smollm2-135m --text-file chapter.txt -o chapter.html
    """
    from qkv.notebook.export import to_html

    if model_name is not None:
        if preset is not None:
            raise CliError("--preset and --model exclude each other: export a scene or a model run")
        if not text or not text.strip():
            raise CliError("--model needs --text or --text-file: the sentence to run through")
        m = model_or_error(model_name)
        bad = sorted(set(layers) - set(range(m.n_layers)))
        if bad:
            raise CliError(f"--layer must be in [0, {m.n_layers}) for {model_name}, got {bad}")
        try:
            obj = m.trace(text, layers=sorted(set(layers)) or None)
        except ValueError as e:
            raise CliError(f"--text: {e}") from None
    else:
        if text is not None or layers:
            raise CliError("--text and --layer go with --model")
        obj = scenes.load(preset or scenes.DEFAULT)
    if select is not None and select.strip().lstrip("-").isdigit():
        select = int(select)
    try:
        with _progress() as tick:
            html = to_html(
                obj, output, temperatures=list(temperatures) or None, select=select, progress=tick
            )
    except ValueError as e:
        raise CliError(str(e)) from None
    except OSError as e:
        raise CliError(f"cannot write {output}: {e.strerror}") from None
    click.echo(f"wrote {output} ({len(html) / 1e6:.1f} MB)")


@contextlib.contextmanager
def _progress():
    """A progress bar on standard error while a long text's heads are pooled (none for a
    file of panels, which calls no progress)."""
    bar = None

    def tick(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=total, label="pooling heads", file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)

    try:
        yield tick
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
