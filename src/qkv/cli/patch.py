"""``qkv patch``: edit attention heads of a real model and see the next token change."""

from __future__ import annotations

import json

import click

from qkv import checks
from qkv.cli.common import (
    checked,
    count_option,
    echo_sections,
    format_option,
    model_options,
    text_options,
    transformers_run,
)
from qkv.cli.errors import CliError


def _head(text: str, option: str) -> str:
    layer, dot, head = text.partition(".")
    if not layer.isdigit() or dot and not head.isdigit():
        raise CliError(f"{option} takes LAYER.HEAD (like 3.4) or LAYER, got {text!r}")
    return text


def _assignment(text: str, option: str) -> tuple[str, str]:
    where, eq, value = text.partition("=")
    if not eq or not value:
        raise CliError(f"{option} takes LAYER.HEAD=VALUE (like 5.1=0.5), got {text!r}")
    return _head(where, option), value


def spec_from_options(ablate, mean, tau, pin, knockout) -> dict:
    """The edits dict ``qkv.hf.intervene`` takes, from the command's options."""
    spec: dict[str, dict] = {}

    def add(where, key, value, option):
        change = spec.setdefault(where, {})
        if key in change:
            raise CliError(f"{option}: {where} is given twice")
        change[key] = value

    for where in ablate:
        add(_head(where, "--ablate"), "ablate", "zero", "--ablate")
    for where in mean:
        add(_head(where, "--mean-ablate"), "ablate", "mean", "--mean-ablate")
    for where in pin:
        add(_head(where, "--pin"), "pin", "uniform", "--pin")
    for text in tau:
        where, value = _assignment(text, "--tau")
        add(where, "tau", checked(checks.temperature_value, value, f"--tau {where}: τ"), "--tau")
    for text in knockout:
        where, value = _assignment(text, "--knockout")
        if not value.lstrip("-").isdigit():
            raise CliError(f"--knockout takes LAYER.HEAD=KEY_POSITION, got {text!r}")
        add(where, "knockout", int(value), "--knockout")
    if not spec:
        raise CliError(
            "give at least one edit: --ablate, --mean-ablate, --pin, --tau or --knockout"
        )
    return spec


@click.command()
@model_options("model_spec", default="smollm2-135m", bundled="causal: smollm2-135m")
@text_options("the prompt whose next token is predicted (or --text-file)")
@click.option("--ablate", multiple=True, metavar="L.H", help="set head H of layer L's z to 0")
@click.option(
    "--mean-ablate",
    "mean",
    multiple=True,
    metavar="L.H",
    help="set the head's z to its mean over the batch",
)
@click.option(
    "--pin",
    multiple=True,
    metavar="L.H",
    help="pin the head's weights to uniform over the keys it may see",
)
@click.option("--tau", multiple=True, metavar="L.H=τ", help="the head's temperature τ > 0")
@click.option(
    "--knockout",
    multiple=True,
    metavar="L.H=J",
    help="mask key position J for the head (L alone: every head of layer L)",
)
@count_option("--top-k", default=5, most=50, help="how many likeliest next tokens to list")
@format_option()
def patch(model_spec, text, ablate, mean, pin, tau, knockout, top_k, allow_pickle, fmt):
    """Edit attention heads and compare the next-token distribution before and after.

    Heads are LAYER.HEAD (0-based, layers in the order the model runs them); LAYER alone
    means every head. KL is KL(before ‖ after) in nats: 0 when the edit changes nothing.
    Tokens are the model's text with edge spaces shown as ␣ ("␣Mary" is " Mary").

    \b
    Examples:
      qkv patch --text "The capital of France is" --ablate 3.4 --tau 5.1=0.5
      qkv patch --model ./my-llama --text "1 2 3 1 2" --pin 2.0 --knockout 1=0
    """
    if text is None:
        raise CliError("give the prompt with --text or --text-file")
    spec = spec_from_options(ablate, mean, tau, pin, knockout)
    with transformers_run(model_spec, text):
        from qkv.hf import compare, loading

        model, tokenizer, name = loading.load(model_spec, allow_pickle=allow_pickle)
        inputs = tokenizer(text, return_tensors="pt")
        report = compare(model, dict(inputs), spec, tokenizer=tokenizer, top_k=top_k)
    if fmt == "json":
        click.echo(
            json.dumps(
                {
                    "model": name,
                    "text": text,
                    "edits": report.edits,
                    "before": report.before,
                    "after": report.after,
                    "kl": report.kl,
                }
            )
        )
        return
    from qkv.explain.format import Table, section
    from qkv.explain.tokens import visible

    rows = tuple(
        (str(i + 1), visible(b[0]), f"{b[1]:.4f}", visible(a[0]), f"{a[1]:.4f}")
        for i, (b, a) in enumerate(zip(report.before, report.after, strict=False))
    )
    echo_sections(
        [
            section(f"{name}: next token after {text!r}", *report.edits),
            section(
                "next token, before → after",
                Table(("rank", "before", "p", "after", "p"), rows),
                f"KL(before ‖ after) = {report.kl:.4g} nats",
            ),
        ],
        fmt,
    )
