"""``qkv export``: the simulator's panels for one scene or one model run, as a single HTML file
that opens offline (scripts, styles and every precomputed number inline)."""

from __future__ import annotations

import click

from qkv import models
from qkv.cli.common import TAU, model_or_error, text_options, trace_file_options
from qkv.cli.errors import CliError
from qkv.explain import scenes

# Every query × head × layer is computed into the file: past this many tokens it grows too big.
EXPORT_TOKENS = 64


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
@text_options(f"the sentence for --model (at most {EXPORT_TOKENS} tokens)")
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
    the token, head and layer selection offline, in any browser.

    \b
    Examples:
      qkv export --preset bank --select bank -o bank.html
      qkv export --preset two-heads --temperature 0.5 --temperature 1 --temperature 2 -o heads.html
      qkv export --model minilm-l6 --text "The bank raised its rates" -o run.html
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
            m.encode(text, limit=EXPORT_TOKENS)
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
        html = to_html(obj, output, temperatures=list(temperatures) or None, select=select)
    except ValueError as e:
        raise CliError(str(e)) from None
    except OSError as e:
        raise CliError(f"cannot write {output}: {e.strerror}") from None
    click.echo(f"wrote {output} ({len(html) / 1e6:.1f} MB)")
