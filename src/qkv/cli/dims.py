"""``qkv dims``: sizes, parameters, FLOPs and memory of attention for a configuration."""

from __future__ import annotations

import dataclasses
import json

import click

from qkv.cli.common import echo_sections, flag, format_option
from qkv.cli.errors import CliError
from qkv.explain.dims import MODELS, AttentionDims, model, sections

MAX_SIZE = 2**53  # every count the report derives from sizes this large is exact and finite


class Size(click.ParamType):
    """A whole number of at most MAX_SIZE in size; a larger one is one line naming the option
    (AttentionDims checks that it is ≥ 1). Click's int would let 10**400 reach an OverflowError."""

    name = "integer"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if not text.lstrip("+-").isdigit():
            self.fail(f"{text[:40]!r} is not a whole number", param, ctx)
        digits = len(text.lstrip("+-0"))
        if digits <= len(str(MAX_SIZE)) and abs(int(text)) <= MAX_SIZE:
            return int(text)
        sign = "a negative" if text.startswith("-") else "a"
        got = f"{int(text):,}" if digits <= 30 else f"{sign} number of {digits:,} digits"
        option = param.opts[0] if param is not None else "a size"
        raise CliError(f"{option} must be a whole number from 1 to 2**53 = {MAX_SIZE:,}, got {got}")


@click.command(short_help="Sizes, parameters, FLOPs and memory of a configuration.")
@click.option("--d-model", type=Size(), metavar="N", help="Width of x.  Example: --d-model 768")
@click.option("--n-heads", type=Size(), metavar="H", help="Query heads.  Example: --n-heads 12")
@click.option(
    "--n-kv-heads",
    type=Size(),
    metavar="G",
    help="K/V heads, fewer than H for grouped-query attention (default: H).  "
    "Example: --n-kv-heads 3",
)
@click.option(
    "--context",
    type=Size(),
    metavar="T",
    help="Tokens attended over (default 1024, or the model's own).  Example: --context 4096",
)
@click.option(
    "--layers",
    type=Size(),
    metavar="N",
    help="Attention layers (default 1, or the model's own).  Example: --layers 12",
)
@flag("--bias", "Count biases on Q, K, V and W_O (GPT-2 style).")
@click.option(
    "--model",
    "model_name",
    metavar="NAME",
    help=f"A known configuration instead of the sizes: {', '.join(MODELS)}.  "
    "Example: --model smollm2-135m",
)
@format_option()
def dims(d_model, n_heads, n_kv_heads, context, layers, bias, model_name, fmt):
    """Sizes, parameters, FLOPs and memory of one attention configuration.

    Prints d_head = d_model / n_heads and √d_head, the parameters of one layer (W_Q, W_K, W_V,
    W_O, biases), the scores per head and per layer at context T and their memory at float32
    and bfloat16, the forward FLOPs (projections and the T² part apart), and the KV-cache bytes
    per token.

    \b
    Examples:
      qkv dims --d-model 768 --n-heads 12 --context 1024
      qkv dims --d-model 576 --n-heads 9 --n-kv-heads 3 --layers 30
      qkv dims --model andrea-2b
      qkv dims --model mini-gpt --format json
    """
    try:
        config = _config(d_model, n_heads, n_kv_heads, context, layers, bias, model_name)
    except ValueError as e:
        raise CliError(str(e)) from None
    if fmt == "json":
        click.echo(json.dumps(config.to_dict(), indent=2))
    else:
        echo_sections(sections(config), fmt)


def _config(d_model, n_heads, n_kv_heads, context, layers, bias, model_name) -> AttentionDims:
    overrides = {k: v for k, v in (("context", context), ("layers", layers)) if v is not None}
    if model_name is not None:
        given = [
            f"--{n}"
            for n, v in (("d-model", d_model), ("n-heads", n_heads), ("n-kv-heads", n_kv_heads))
            if v is not None
        ]
        if given or bias:
            raise ValueError(
                f"--model {model_name} sets the sizes itself; drop "
                f"{', '.join(given + (['--bias'] if bias else []))} (only --context "
                "and --layers may be changed)"
            )
        return dataclasses.replace(model(model_name), **overrides)
    if d_model is None or n_heads is None:
        missing = [n for n, v in (("--d-model", d_model), ("--n-heads", n_heads)) if v is None]
        raise ValueError(
            f"give --d-model and --n-heads, or --model NAME (one of "
            f"{list(MODELS)}); missing {' and '.join(missing)}"
        )
    return AttentionDims(d_model, n_heads, n_kv_heads, qkv_bias=bias, out_bias=bias, **overrides)
