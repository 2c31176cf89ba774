"""``qkv bench``: exact attention side by side with its peers on this machine (``qkv.bench``)."""

from __future__ import annotations

import json
import shutil

import click

from qkv.bench import pinned
from qkv.bench.peers import PEERS, Config, unavailable
from qkv.bench.run import QUICK, header, machine, progress_bar, render, run
from qkv.cli.common import count_option, flag, head_shape_options, json_option, number_option
from qkv.cli.errors import CliError


def _sizes(_ctx, _param, value: str) -> list[int]:
    try:
        sizes = [int(t) for t in value.split(",") if t.strip()]
    except ValueError:
        raise CliError(
            f"--T: expected comma-separated integers like 1024,4096, got {value!r}"
        ) from None
    if not sizes or min(sizes) < 1:
        raise CliError(f"--T: expected positive sizes, got {value!r}")
    return sizes


@click.command(name="bench")
@click.option(
    "--T",
    "T",
    default="1024,4096,16384",
    callback=_sizes,
    show_default=True,
    help="Sequence lengths (cache lengths with --decode), comma-separated.",
)
@head_shape_options(heads=12)
@flag("--causal", "Also run causal prefill.")
@flag("--decode", "Also run one-token decode steps against a cache of T keys.")
@flag(
    "--wide", "Also run every kind with q and k drawn 4× wider (scores that need the running max)."
)
@flag("--skip-full", "Leave out full (non-causal) prefill.")
@flag("--quick", "Tiny sizes, every kind, short timings (a smoke test that takes seconds).")
@click.option(
    "--peers",
    "peer_list",
    default=",".join(PEERS),
    show_default=True,
    help="Which peers to run, comma-separated.",
)
@number_option(
    "--min-time",
    default=1.0,
    at_least=0,
    help="Seconds of repeats per peer per configuration (at least 3 repeats).",
)
@number_option(
    "--max-memory",
    default=6.0,
    at_least=0,
    help="GiB: peers whose score matrices would need more are skipped.",
)
@count_option(
    "--gemm-size", default=4096, help="n for the n³ float32 matmul that sets the GEMM peak."
)
@flag("--no-memory", "Skip the child-process memory measurement.")
@click.option(
    "--model",
    "model_name",
    default=None,
    type=click.Choice(["smollm2-135m"]),
    help="Instead: a real model's greedy generation (a 32-token prompt unless --prompt, "
    "64 new tokens, float32), qkv traced and untraced against transformers' generate "
    "(sdpa, eager) on the same weights.",
)
@count_option(
    "--prompt",
    "prompt_tokens",
    default=None,
    help="With --model: the prompt's length in tokens (default 32; the benchmark's text "
    "repeated), up to the model's context less the new tokens; e.g. --prompt 4000 for "
    "decoding against a long cache.",
)
@flag(
    "--hf",
    "With --model: also transformers' generate with "
    'attn_implementation="qkv" (untraced and inside qkv.hf.trace) and eager with '
    "output_attentions=True, on the same weights.",
)
@click.option(
    "--threads",
    "thread_spec",
    default="1,all",
    show_default=True,
    help="Thread counts to measure at, comma-separated ('all': every core this process may "
    "use); each run pins every library to that many cores.",
)
@flag(
    "--tune",
    "Instead: the tile sizes the kernels chose on this processor and why (measured on "
    "first use, a few seconds, then kept in the user's cache).",
)
@flag("--retune", "Like --tune, after forgetting the cached choice.")
@json_option(help="Print JSON instead of a table.")
@click.option(
    "--trace",
    "trace_tokens",
    is_flag=False,
    flag_value="2048,8192",
    default=None,
    metavar="[TOKENS]",
    help="Instead: a lazy trace of SmolLM2 (all layers) at these token counts (default "
    "2048,8192): bytes held, peak memory, traced ÷ untraced time, one head's read time.",
)
def bench(
    T,
    heads,
    d,
    causal,
    decode,
    wide,
    skip_full,
    quick,
    peer_list,
    min_time,
    max_memory,
    gemm_size,
    no_memory,
    model_name,
    prompt_tokens,
    hf,
    thread_spec,
    tune,
    retune,
    as_json,
    trace_tokens,
):
    """Time exact attention: qkv's kernels and reference, naive NumPy, torch SDPA and math.

    \b
    Examples:
      qkv bench --quick                       a few seconds, every kind of run
      qkv bench --T 4096,16384 --causal --decode
      qkv bench --T 4096 --json > bench.json
      qkv bench --model smollm2-135m          generation: tokens/s against transformers
      qkv bench --model smollm2-135m --hf     also transformers running qkv's attention
      qkv bench --model smollm2-135m --prompt 4000   generation after a long prompt
      qkv bench --tune                        the tile sizes chosen here, and why
    The header names the processor, the BLAS library and the kernel it runs. Figures for a
    user's machine: unset OpenBLAS pins first (env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
    qkv bench ...).
    """
    if trace_tokens is not None:
        return _trace(trace_tokens, as_json)
    if tune or retune:
        from qkv.bench import tuned

        return _show(tuned.report(retune=retune), tuned.render, as_json)
    if model_name is not None:
        return _model(model_name, quick, hf, prompt_tokens, as_json)
    if hf:
        raise CliError("--hf: expected it with --model (e.g. --model smollm2-135m --hf)")
    if prompt_tokens is not None:
        raise CliError(
            f"--prompt {prompt_tokens}: expected it with --model "
            f"(e.g. --model smollm2-135m --prompt {prompt_tokens})"
        )
    gemm_n, settle, copy_bytes = gemm_size, 0.25, 1 << 28
    if quick:
        T, heads, d, min_time = list(QUICK.T), QUICK.heads, QUICK.d, QUICK.min_time
        gemm_n, settle, copy_bytes = QUICK.gemm_n, QUICK.settle, QUICK.copy_bytes
        causal = decode = True
    kinds = [(False, False)] * (not skip_full) + [(True, False)] * causal + [(False, True)] * decode
    if not kinds:
        raise CliError("nothing to run: --skip-full needs --causal or --decode")
    widths = [1.0, 4.0] if wide else [1.0]
    configs = [Config(t, heads, d, c, dec, w) for w in widths for c, dec in kinds for t in T]
    chosen = [p.strip() for p in peer_list.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PEERS]
    if unknown:
        raise CliError(f"--peers: unknown peers {unknown}; expected some of {list(PEERS)}")
    try:
        threads = pinned.counts(thread_spec)
    except ValueError as e:
        raise CliError(str(e)) from None
    skipped = unavailable(chosen)
    chosen = [p for p in chosen if p not in skipped]
    report = run(
        configs,
        chosen,
        threads=threads,
        min_time=min_time,
        max_memory=max_memory * 2**30,
        memory=not no_memory,
        gemm_n=gemm_n,
        settle=settle,
        show_progress=not as_json,
        skipped=skipped,
        copy_bytes=copy_bytes,
    )
    _show(report, render, as_json)


def _model(name: str, quick: bool, hf: bool, prompt: int | None, as_json: bool) -> None:
    """``--model``: generation side by side with transformers (``qkv.bench.generation``), with
    a progress bar on stderr (the runs of a long prompt take minutes)."""
    from qkv.bench import generation
    from qkv.models import ModelNotInstalled

    sizes = {"new_tokens": 8, "repeats": 1} if quick else {}
    progress = progress_bar(not as_json)
    task = progress.add_task("loading the model", total=None)

    def step(done: int, total: int | None, peer: str) -> None:
        progress.update(task, advance=done, description=peer or "generating", total=total)

    try:
        with progress:
            report = generation.run_model(
                name,
                hf=hf,
                prompt_tokens=prompt or generation.PROMPT_TOKENS,
                on_step=step,
                **sizes,
            )
    except ModelNotInstalled as e:
        raise CliError(str(e)) from None
    except generation.TooLong as e:
        raise CliError(f"--prompt {prompt}: {e}") from None
    report = {"machine": machine(), **report}

    def render_all(r: dict, console) -> None:
        console.print("[bold]qkv bench --model[/] · " + "\n".join(header(r["machine"])))
        generation.render_model(r, console)

    _show(report, render_all, as_json)


def _trace(tokens: str, as_json: bool) -> None:
    """``--trace``: what a lazy trace of a long text costs (``qkv.bench.trace``)."""
    from qkv.bench import trace

    try:
        counts = [int(t) for t in tokens.split(",") if t.strip()]
    except ValueError:
        raise CliError(f"--trace: expected comma-separated token counts, got {tokens!r}") from None
    try:
        report = trace.run_trace(counts, show_progress=not as_json)
    except ValueError as e:
        raise CliError(f"--trace {tokens}: {e}") from None
    _show(report, trace.render_trace, as_json)


def _show(report: dict, draw, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        from rich.console import Console

        draw(report, Console(width=max(132, shutil.get_terminal_size().columns)))
