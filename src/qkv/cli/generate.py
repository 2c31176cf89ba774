"""``qkv generate``: stream a causal model's continuation of a prompt, token by token."""

from __future__ import annotations

import time

import click

from qkv import checks
from qkv.cli.common import Number, count_option, model_or_error, read_text, seed_option
from qkv.cli.errors import CliError


@click.command()
@click.option(
    "--model",
    "model_name",
    default="smollm2-135m",
    show_default=True,
    type=click.Choice(["smollm2-135m"]),
    help="a causal language model",
)
@click.argument("text", required=False, metavar="[PROMPT]")
@click.option(
    "--prompt", metavar="TEXT", help="what the model continues (or give it as the argument PROMPT)"
)
@click.option(
    "--text-file",
    "text_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE",
    help="read the prompt from FILE (UTF-8; - reads standard input)",
)
@click.option("--max-new-tokens", default=48, show_default=True, type=click.IntRange(1, 4096))
@click.option(
    "--temperature",
    default=0.0,
    show_default=True,
    type=Number(checks.sampling_temperature),
    help="0 = greedy; higher samples more freely",
)
@count_option("--top-k", default=None, help="sample only among the k most likely tokens")
@seed_option("seed for sampling", default=None)
@click.option(
    "--chat/--raw",
    default=True,
    show_default=True,
    help="wrap the prompt in the model's chat template, or continue it as raw text",
)
def generate(text, model_name, prompt, text_file, max_new_tokens, temperature, top_k, seed, chat):
    """Stream the model's continuation of PROMPT, token by token (qkv's attention, KV cache).

    Give the prompt once: as the argument, with --prompt, or in a file with --text-file.

    \b
    Examples:
      qkv generate "What is the capital of France?"
      qkv generate "The capital of France is" --raw --max-new-tokens 5
      qkv generate --prompt "What is the capital of France?"
      qkv generate --prompt "Once upon a time" --raw --temperature 0.8 --top-k 40 --seed 1
      qkv generate --text-file story.txt --raw --max-new-tokens 100
    """
    if text_file is not None:
        if text is not None or prompt is not None:
            raise CliError("give the prompt once: as the argument, with --prompt or --text-file")
        prompt = read_text(text_file, "--text-file")
    if text is None and prompt is None:
        raise CliError(
            'give a prompt, e.g. qkv generate "The capital of France is" (or --prompt TEXT, '
            "or --text-file FILE)"
        )
    if text is not None and prompt is not None:
        raise CliError(
            f"give the prompt once, as the argument or with --prompt, not both; got "
            f"{text!r} and --prompt {prompt!r}"
        )
    prompt = prompt if text is None else text
    m = model_or_error(model_name)
    try:
        stream = m.generate(
            prompt, max_new_tokens, temperature=temperature, top_k=top_k, seed=seed, chat=chat
        )
        start, n = time.perf_counter(), 0
        for token in stream:
            if token.id == m.eos_id:
                break
            click.echo(token.text, nl=False)
            n += 1
    except ValueError as e:
        raise CliError(f"--prompt: {e}") from None
    elapsed = time.perf_counter() - start
    click.echo()
    click.echo(f"[{n} tokens in {elapsed:.2f} s, {n / elapsed:.1f} tokens/s]", err=True)
