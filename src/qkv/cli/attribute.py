"""``qkv attribute``: which heads and MLPs of a real model wrote the next token — direct logit
attribution, the logit lens, and (with --corrupted) activation patching."""

from __future__ import annotations

import json

import click

from qkv.cli.common import (
    FilePath,
    count_option,
    echo_sections,
    format_option,
    json_option,
    model_options,
    png_option,
    require,
    transformers_run,
)
from qkv.cli.errors import CliError

HELP = """Which parts of a real model wrote the next token after TEXT.

Direct logit attribution splits logit(TARGET) − logit(BASELINE) (or logit(TARGET) alone) at the
last position into shares: the embeddings, every head (its z through its slice of W_O), every
MLP and the biases, each read through the final norm with the scale of the real final residual
held fixed, so the shares add up to the model's own logit difference. The top heads' shares are
split by the key each read (weight · v through W_O). The logit lens reads the residual after
each layer as if it were the last. With --corrupted (a prompt of as many tokens), activation
patching scores each head by the share of LD_clean − LD_corrupted that its clean z restores.

Tokens are written as the model's text, edge spaces shown as ␣: --target ␣Mary is " Mary".

\b
Examples:
  qkv attribute --text "When Mary and John went to the store, John gave a drink to" \\
      --target ␣Mary --baseline ␣John
  qkv attribute --text "..." --target ␣Mary --baseline ␣John \\
      --corrupted "When Mary and John went to the store, Mary gave a drink to" --png ioi.png
  qkv attribute --model ./my-llama --text "1 2 3 1 2" --target ␣3 --json
"""


@click.command(help=HELP)
@model_options("model_spec", default="smollm2-135m", bundled="causal: smollm2-135m")
@click.option("--text", required=True, help="the prompt whose next token is explained")
@click.option("--target", required=True, help="the token explained: one token (␣ = a space)")
@click.option("--baseline", help="explain logit(TARGET) − logit(BASELINE): one token")
@click.option(
    "--corrupted",
    help="a prompt of as many tokens as TEXT that changes the answer: adds activation patching",
)
@count_option("--top", default=5, most=50, help="how many top heads to list and split by key")
@png_option("also draw the result into this PNG")
@click.option(
    "--html",
    type=FilePath(writable=True),
    help='also write the "why this token" panel as one self-contained HTML file',
)
@json_option(help="print the result as one JSON object")
@format_option(json_ok=False)
def attribute(
    model_spec, text, target, baseline, corrupted, top, png, html, as_json, allow_pickle, fmt
):
    if png:
        require("matplotlib")
    with transformers_run(model_spec, text):
        from qkv import hf
        from qkv.hf import loading

        model, tokenizer, name = loading.load(model_spec, allow_pickle=allow_pickle)
        a = hf.attribute(model, text, target, baseline=baseline, tokenizer=tokenizer, by_key=top)
        report = a.to_dict()
        ids = dict(target=a.target.id, tokenizer=tokenizer)
        report["lens"] = hf.lens(model, text, **ids).to_dict()["layers"]
        report["patching"] = None
        if corrupted is not None:
            b = None if a.baseline is None else a.baseline.id
            report["patching"] = hf.patching(model, text, corrupted, baseline=b, **ids).to_dict()
    report = {"model": name, "text": text, "corrupted": corrupted, **report}
    if png:
        from qkv.hf.attribution_plot import describe, save

        save(report, png, title=f"{name}: {describe(report)} after {text!r}")
    if html:
        from qkv.notebook.export import to_html

        try:
            to_html(a, html, patching=report["patching"], title=f"qkv · {name}: why?")
        except OSError as e:
            raise CliError(f"cannot write {html}: {e.strerror}") from None
    if as_json:
        click.echo(json.dumps(report))
    else:
        from qkv.cli.attribution_text import sections

        echo_sections(sections(report, top), fmt)
    for path in (png, html):
        if path:
            click.echo(f"wrote {path}", err=as_json)
