"""Click commands for real models: ``heads`` (a layers × heads grid) and ``generate``.

The lead registers them in cli.py's COMMANDS as "qkv.models.commands:heads" and
"qkv.models.commands:generate".
"""

from __future__ import annotations

import time

import click

from qkv import models
from qkv.models import patterns

load_model = models.load  # the one place commands load weights (tests hand in a loaded model)
HEADS_MAX_TOKENS = 64  # a grid past this is unreadable; the trace grows with L²


def _load(name: str):
    from rich.console import Console

    console = Console(stderr=True)
    try:
        with console.status(f"loading {name} (reading and converting its weights)…"):
            return load_model(name)
    except models.ModelNotInstalled as e:
        raise click.ClickException(str(e)) from None


@click.command()
@click.option("--model", "model_name", default="minilm-l6", show_default=True,
              type=click.Choice(models.names()), help="which pretrained model")
@click.option("--text", required=True, help="the sentence to run through the model")
@click.option("--png", type=click.Path(dir_okay=False, writable=True),
              help="also draw every head's attention matrix into this PNG file")
def heads(model_name: str, text: str, png: str | None):
    """A layers × heads grid naming what each attention head does on TEXT.

    Each cell names the head's strongest pattern (first/last/prev/self/next token, or mixed)
    with the mean weight it gets.

    \b
    Examples:
      qkv heads --model minilm-l6 --text "The bank raised interest rates"
      qkv heads --model smollm2-135m --text "The cat sat on the mat" --png heads.png
    """
    m = _load(model_name)
    try:
        m.encode(text, limit=HEADS_MAX_TOKENS)
        run = m.trace(text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--text") from None
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


@click.command()
@click.option("--model", "model_name", default="smollm2-135m", show_default=True,
              type=click.Choice(["smollm2-135m"]), help="a causal language model")
@click.option("--prompt", required=True, help="what the model continues")
@click.option("--max-new-tokens", default=48, show_default=True, type=click.IntRange(1, 4096))
@click.option("--temperature", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="0 = greedy; higher samples more freely")
@click.option("--top-k", default=None, type=click.IntRange(min=1),
              help="sample only among the k most likely tokens")
@click.option("--seed", default=None, type=int, help="seed for sampling")
@click.option("--chat/--raw", default=True, show_default=True,
              help="wrap the prompt in the model's chat template, or continue it as raw text")
def generate(model_name, prompt, max_new_tokens, temperature, top_k, seed, chat):
    """Stream the model's continuation of PROMPT, token by token (qkv's attention, KV cache).

    \b
    Examples:
      qkv generate --prompt "What is the capital of France?"
      qkv generate --prompt "Once upon a time" --raw --temperature 0.8 --top-k 40 --seed 1
    """
    m = _load(model_name)
    try:
        stream = m.generate(prompt, max_new_tokens, temperature=temperature, top_k=top_k,
                            seed=seed, chat=chat)
        start, n = time.perf_counter(), 0
        for token in stream:
            if token.id == m.eos_id:
                break
            click.echo(token.text, nl=False)
            n += 1
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--prompt") from None
    elapsed = time.perf_counter() - start
    click.echo()
    click.echo(f"[{n} tokens in {elapsed:.2f} s, {n / elapsed:.1f} tokens/s]", err=True)
