"""``qkv explain``: one scene's attention, step by step, with the real numbers."""

from __future__ import annotations

import json
from typing import Any

import click

from qkv.cli.common import (
    FilePath,
    allow_pickle_option,
    any_model_or_error,
    echo_sections,
    flag,
    format_option,
    number_option,
    png_option,
    temperature_option,
    text_options,
)
from qkv.cli.errors import CliError
from qkv.explain import scenes


def _token(text: str | None):
    if text is None:
        return None
    return int(_index(text)) if text.lstrip("-").isdigit() else text


def _index(select: str) -> str:
    """--select as given, refused when it is a negative index: positions run from 0 (the
    pickers would count a negative one from the end, which no message offers)."""
    text = select.strip()
    if text.startswith("-") and text[1:].isdigit() and int(text) < 0:
        raise CliError(f"--select: a token index must be ≥ 0 (positions run from 0), got {select}")
    return select


def _labelled(tokens, select: str | None) -> int | None:
    """The position --select names as a row label ("the@4", as the walkthrough and the page
    label a repeated token), None when it is no label."""
    from qkv.explain.walkthrough import select_label

    return None if select is None else select_label(tokens, select)


@click.command()
@click.option(
    "--preset",
    default=scenes.DEFAULT,
    show_default=True,
    metavar="NAME",
    help=f"Scene to explain: {', '.join(scenes.names())}.  Example: --preset bank",
)
@click.option(
    "--select",
    metavar="TOKEN|TOKEN@POS|INDEX",
    help="The query token, by text, by the row label of a repeated token "
    "(token@position), or by position (default: the scene's own choice).  "
    "Example: --select cat  or  --select the@4  or  --select 1",
)
@temperature_option("τ > 0 divides the scaled scores; < 1 sharpens, > 1 flattens.  Example: -t 0.5")
@flag(
    "--no-scale",
    "Skip the ÷√d_k (the unscaled worked example).  Example: --preset two-token --no-scale",
)
@flag("--causal", "Hide the keys after each query (a decoder's causal mask).")
@number_option(
    "--softcap",
    above=0,
    metavar="CAP",
    help="Soft-cap the scores to CAP·tanh(s/CAP), as Gemma 2 does (step 'capped').  "
    "Example: --softcap 1",
)
@number_option(
    "--sink",
    metavar="LOGIT",
    help="Add a sink logit to each row's softmax, as GPT-OSS does: it takes weight and "
    "gives no value (step 'sink').  Example: --sink 0",
)
@number_option(
    "--alibi",
    at_least=0,
    metavar="SLOPE",
    help="Add ALiBi's bias −SLOPE·distance between query and key positions, as BLOOM "
    "and MPT do (step 'biased').  Example: --alibi 0.5",
)
@click.option(
    "--head",
    type=int,
    metavar="H",
    help="Which head to walk through in a multi-head scene (from 0).  "
    "Example: --preset two-heads --head 1",
)
@format_option()
@png_option(
    "Also write a heatmap of the weights (queries × keys, masked cells marked, "
    "the selected row outlined); needs matplotlib.  Example: --png weights.png",
)
@click.option(
    "--model",
    "model_name",
    metavar="NAME",
    help="A real pretrained model instead of a preset (minilm-l6, smollm2-135m, a "
    "local transformers directory, or a hub id owner/name: the local Hugging "
    "Face cache, else downloaded); use with --text, --layer and --head.  "
    "Example: --model smollm2-135m --text 'The cat sat on the mat' --layer 3 "
    "--head 2",
)
@allow_pickle_option
@click.option(
    "--checkpoint",
    type=FilePath(),
    metavar="FILE",
    help="A Mini-GPT checkpoint from 'qkv lab train' instead of a preset; use with "
    "--text, --layer and --head.  Example: --checkpoint minigpt.npz --text "
    "'the key to the cabinets ___' --layer 1 --head 0",
)
@text_options("The text to run through --model (up to its context; past 64 tokens a summary "
              "is printed) or --checkpoint.")  # fmt: skip
@click.option(
    "--layer",
    type=int,
    default=0,
    show_default=True,
    metavar="L",
    help="Which layer of --model or --checkpoint to explain (from 0).",
)
def explain(
    preset,
    select,
    temperature,
    no_scale,
    causal,
    softcap,
    sink,
    alibi,
    head,
    fmt,
    png,
    model_name,
    allow_pickle,
    checkpoint,
    text,
    layer,
):
    """Walk through attention for one query token of a built-in scene.

    Prints the input vectors X, the query, keys and values, every score q·k (one written out
    term by term), the scaling, temperature, mask and softmax weights (with their sum and
    entropy), each key's contribution weight·v, the output z, and the formula with this
    scene's shapes. --format json writes the whole trace instead.

    \b
    Examples:
      qkv explain
      qkv explain --preset two-token --no-scale
      qkv explain --preset cat-sat --select mat --temperature 0.5 --causal
      qkv explain --preset two-heads --head 1 --format markdown
      qkv explain --preset cat-sat --softcap 1 --sink 0 --alibi 0.5 --causal
      qkv explain --format json > trace.json
      qkv explain --png weights.png
      qkv explain --model smollm2-135m --text "The cat sat on the mat" --layer 3 --head 2
      qkv explain --model minilm-l6 --text "The bank raised rates" --select bank --png w.png
      qkv explain --model smollm2-135m --text-file essay.txt --layer 5 --select 100
    """
    given = {"softcap": softcap, "sink": sink, "alibi": alibi}
    extra = {name: value for name, value in given.items() if value is not None}
    if extra and (model_name is not None or checkpoint or text):
        raise CliError(
            "--softcap, --sink and --alibi apply to presets; a real model or a "
            "checkpoint runs with the steps it was trained with"
        )
    if model_name is not None:
        if checkpoint:
            raise CliError("give --model or --checkpoint, not both")
        if temperature != 1.0 or no_scale or causal:
            raise CliError(
                "--temperature, --no-scale and --causal apply to presets and "
                "checkpoints; a real model runs with its own scale, τ = 1 and mask"
            )
        run = _model_trace(model_name, text, layer, allow_pickle)
        return _explain_trace(*run, select, head, fmt, png)
    if checkpoint or text:
        run = _checkpoint_trace(checkpoint, text, layer, temperature, no_scale)
        return _explain_trace(*run, select, head, fmt, png)
    try:
        scene = scenes.load(preset)
        i = _labelled(scene.tokens, select)
        if i is None:
            i = scene.select if select is None else scene.index(_token(select))
    except ValueError as e:
        raise CliError(str(e)) from None
    n_heads = scene.n_heads
    if head is not None:
        valid = range(n_heads or 1)
        if head not in valid:
            where = (
                f"scene {preset!r} has {n_heads} heads"
                if n_heads
                else f"scene {preset!r} has a single head"
            )
            raise CliError(f"--head must be one of {list(valid)}: {where}, got {head}")
        if not n_heads:
            head = None
    try:
        trace = scene.trace(
            temperature=temperature, scaled=False if no_scale else None, causal=causal, **extra
        )
    except ValueError as e:
        raise CliError(str(e)) from None

    if png:
        _write_png(trace, png, i, head, f"{scene.name}, τ = {temperature:g}")
    if fmt == "json":
        click.echo(trace.to_json())
        return
    from qkv.explain.format import Section
    from qkv.explain.walkthrough import labels, walkthrough

    projections = {"W_Q": scene.W_Q, "W_K": scene.W_K, "W_V": scene.W_V}
    settings = [
        f"query: {labels(scene.tokens, len(scene.tokens))[i]} (position {i})",
        f"τ = {temperature:g}",
        "scaled by 1/√d_k" if not (no_scale or not scene.scaled) else "no scaling",
        "causal mask" if causal else "no mask",
        *(f"{name} {value:g}" for name, value in extra.items()),
    ]
    intro = Section(f"{scene.name}: {scene.title}", (scene.lesson, " · ".join(settings)))
    echo_sections([intro, *walkthrough(trace, i, head=head, projections=projections)], fmt)


def _write_png(trace, path, i, head, name):
    try:
        from qkv.explain.heatmap import weights_png
    except ImportError as e:  # pragma: no cover - the plot module itself imports lazily
        raise CliError(f"--png needs matplotlib: pip install 'qkv[plot]' ({e})") from None
    try:
        width, height = weights_png(trace, path, query=i, head=head, title=name)
    except ImportError as e:
        raise CliError(f"--png needs matplotlib (pip install 'qkv[plot]'), got: {e}") from None
    except OSError as e:
        raise CliError(f"cannot write the PNG to {path!r}: {e.strerror or e}") from None
    click.echo(f"wrote {path} ({width}×{height} px)", err=True)


def _checkpoint_trace(checkpoint, text, layer, temperature, no_scale) -> tuple[Any, str, str]:
    """(trace, title, about) of one layer of a trained Mini-GPT on a sentence."""
    if not text:
        raise CliError(
            "--checkpoint needs --text, e.g. --checkpoint minigpt.npz --text "
            "'the key to the cabinets ___'"
        )
    if not checkpoint:
        raise CliError("--text needs --model NAME (minilm-l6, smollm2-135m) or --checkpoint FILE")
    from qkv.lab.report import trace_text

    try:
        trace = trace_text(
            checkpoint, text, layer, scale=1.0 if no_scale else None, temperature=temperature
        )
    except FileNotFoundError:
        raise CliError(
            f"no checkpoint at {checkpoint}; make one with 'qkv lab train --out {checkpoint}'"
        ) from None
    except ValueError as e:
        raise CliError(str(e)) from None
    return trace, f"Mini-GPT {checkpoint}: layer {layer}", f"τ = {temperature:g} · causal mask"


def _model_trace(name, text, layer, allow_pickle=False) -> tuple[Any, str, str]:
    """(trace, title, about) of one layer of a real pretrained model on a sentence."""
    from qkv import models

    if text is None:
        raise CliError(
            "--model needs --text or --text-file, e.g. --model smollm2-135m --text 'The cat "
            "sat on the mat'"
        )
    bundled = name in models.NAMES
    model = any_model_or_error(name, allow_pickle=allow_pickle)
    if not 0 <= layer < model.n_layers:
        raise CliError(f"--layer must be in [0, {model.n_layers}) for {model.name}, got {layer}")
    try:
        model.encode(text)  # the model's context is the only limit
        trace = (
            models.layer_trace(name, text, layer=layer, model=model)
            if bundled
            else model.trace(text).layer(layer)
        )  # a local directory: traced via qkv.hf
    except ValueError as e:
        raise CliError(f"--text: {e}") from None
    return trace, f"{model.name}: layer {layer}", MODEL_NOTES.get(name, "")


MODEL_NOTES = {
    "minilm-l6": "x is the layer's input (after LayerNorm); q, k, v add biases (q = x·W_Q + "
    "b_Q); no mask: every token sees the whole sentence",
    "smollm2-135m": "x is the layer's input after RMSNorm; q and k are rotated by RoPE; "
    "9 query heads share 3 K/V heads (head h reads K/V head h // 3); causal mask",
}


def _explain_trace(trace, title: str, about: str, select, head, fmt, png):
    """What --checkpoint and --model share: choose the query (default: the last token) and
    the head, then write the PNG, the JSON trace or the walkthrough."""
    from qkv.models.result import token_index

    tokens = trace.tokens
    n_heads = trace.settings["n_heads"]
    head = 0 if head is None else head
    if not 0 <= head < n_heads:
        raise CliError(f"--head must be in [0, {n_heads}), got {head}")
    try:
        i = _labelled(tokens, select)
        if i is None:
            i = len(tokens) - 1 if select is None else token_index(tokens, _index(select))
    except ValueError as e:
        raise CliError(f"--select: {e}") from None
    from qkv.explain.summary import WALK_TOKENS, summary, summary_json

    if len(tokens) > WALK_TOKENS:  # the query's heaviest keys, each head's statistics: never L × L
        if png:
            raise CliError(f"--png draws every cell of up to {WALK_TOKENS} tokens, got "
                           f"{len(tokens)}: 'qkv heads --png' draws long texts pooled")  # fmt: skip
        if fmt == "json":
            return click.echo(json.dumps({"title": title, **summary_json(trace, i, head)}))
        return echo_sections(summary(trace, i, head, title=title), fmt)
    if png:
        _write_png(trace, png, i, head, title)  # weights_png adds ", head H"
    if fmt == "json":
        click.echo(trace.to_json())
        return
    from qkv.explain.format import Section
    from qkv.explain.walkthrough import labels, visible, walkthrough

    intro = Section(
        f"{title}, head {head}",
        (
            f"{len(tokens)} tokens: " + " ".join(visible(t) for t in tokens),
            f"query: {labels(tokens, len(tokens))[i]} (position {i})"
            + (f" · {about}" if about else ""),
        ),
    )
    echo_sections([intro, *walkthrough(trace, i, head=head)], fmt)
