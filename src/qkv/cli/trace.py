"""``qkv trace``: run a text through a model and save its lazy trace to a file."""

from __future__ import annotations

import json
import time

import click

from qkv import models
from qkv.cli.common import (
    any_model_or_error,
    json_option,
    model_options,
    text_options,
    trace_file_options,
)
from qkv.cli.errors import CliError


@click.command()
@model_options("model_name", default="smollm2-135m", bundled=", ".join(models.names()))
@text_options("the text to trace (up to the model's context)")
@trace_file_options("trace", "a layer to keep (repeat; default: every layer)")
@json_option
def trace(model_name, allow_pickle, text, layers, output, as_json):
    """Trace TEXT through a model and save the run: per layer the arrays its attention steps
    are computed from (x, q, k, v, out …), never the L × L steps themselves.

    Load it back in Python with qkv.load(FILE): every step, head and reader of the run, computed
    when read.

    \b
    Examples:
      qkv trace --model smollm2-135m --text-file essay.txt -o essay.qkvtrace
      cat notes.txt | qkv trace --text-file - --layer 3 --layer 4 -o notes.qkvtrace
    """
    if text is None:
        raise CliError("give the text with --text or --text-file")
    bundled = model_name in models.NAMES
    m = any_model_or_error(model_name, allow_pickle=allow_pickle)
    bad = sorted(set(layers) - set(range(m.n_layers)))
    if bad:
        raise CliError(f"--layer must be in [0, {m.n_layers}) for {m.name}, got {bad}")
    start = time.perf_counter()
    try:
        m.encode(text)
        run = m.trace(text, layers=sorted(set(layers)) or None) if bundled else m.trace(text)
    except ValueError as e:
        raise CliError(f"--text: {e}") from None
    if layers and not bundled:
        run.layers = {i: t for i, t in run.layers.items() if i in set(layers)}
    traced = time.perf_counter() - start
    size = run.save(output)
    report = {
        "output": output,
        "model": m.name,
        "tokens": len(run.tokens),
        "layers": sorted(run.layers),
        "bytes": size,
        "seconds": round(traced, 3),
    }
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(
        f"wrote {output}: {m.name}, {len(run.tokens):,} tokens, {len(run.layers)} layers, "
        f"{size / 1e6:,.1f} MB (traced in {traced:.1f} s); read it with qkv.load({output!r})"
    )
