"""``qkv bench --model``: a real model generating text, qkv against transformers, same weights.

Greedy decoding in float32 from one prompt of PROMPT_TOKENS tokens (or as many as asked: the
text's ids repeated), NEW_TOKENS new tokens each
(no early stop), every peer in this process, repeats interleaved across peers (median):

    qkv untraced        model.generate_ids(...)                 fast kernels, preallocated cache
    qkv traced          model.generate_ids(..., weights=True)   every step kept (the page's path)
    transformers sdpa   LlamaForCausalLM.generate, torch SDPA   (``qkv.bench.hf_llama``)
    transformers eager  the same, attention written out in torch
  with ``hf=True`` (``--hf``), on the same LlamaForCausalLM:
    transformers + qkv                       attn_implementation="qkv" (``qkv.hf``)
    transformers + qkv traced                the same inside ``qkv.hf.trace(model)``
    transformers eager + output_attentions   eager, output_attentions=True (weights returned)

Per peer: prefill = seconds to the first new token (the prompt's pass and its logits); decode
tokens/s = the remaining tokens over the time after the first; tokens/s end to end; whether its
tokens equal qkv untraced's.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable

import numpy as np

from qkv.bench import hf_llama

PROMPT_TOKENS = 32
NEW_TOKENS = 64
# cut to PROMPT_TOKENS tokens (repeated for a longer prompt); plain prose, so greedy decoding
# goes on without an end token
TEXT = (
    "The old lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a "
    "lantern, a notebook and a flask of tea. From the top he could see the whole bay, the "
    "fishing boats coming home and the lights of the town across the water."
)
QKV_PEERS = ("qkv untraced", "qkv traced")
HF_PEERS: dict[str, hf_llama.Generate] = {
    "transformers sdpa": {"attn": "sdpa"},
    "transformers eager": {"attn": "eager"},
}
# --hf: transformers' generate with qkv's attention, and the eager run that also returns weights
HF_QKV_PEERS: dict[str, hf_llama.Generate] = {
    "transformers + qkv": {"attn": "qkv"},
    "transformers + qkv traced": {"attn": "qkv", "traced": True},
    "transformers eager + output_attentions": {"attn": "eager", "attentions": True},
}
PEERS = QKV_PEERS + tuple(HF_PEERS) + tuple(HF_QKV_PEERS)
# (ratio name, numerator peer, denominator peer): tokens/s over tokens/s
HF_RATIOS = (
    ("hf_qkv_tokens_per_s_over_sdpa", "transformers + qkv", "transformers sdpa"),
    (
        "hf_qkv_traced_tokens_per_s_over_eager_attentions",
        "transformers + qkv traced",
        "transformers eager + output_attentions",
    ),
)


class TooLong(ValueError):
    """A prompt and its new tokens that do not fit the model's context."""


def prompt_ids(model, n: int = PROMPT_TOKENS) -> list[int]:
    """The benchmark text's first n token ids, the text's ids repeated as often as n needs
    (a long prompt)."""
    if n < 1:
        raise ValueError(f"expected a prompt of at least 1 token, got {n}")
    ids, _ = model.encode(TEXT)
    return (ids * -(-n // len(ids)))[:n]


def _qkv_run(model, ids, new_tokens: int, traced: bool) -> tuple[list[int], float | None, float]:
    """(new ids, seconds to the first new token, seconds in all) for qkv's generate."""
    import time

    t0 = time.perf_counter()
    first: float | None = None
    out: list[int] = []
    for g in model.generate_ids(ids, new_tokens, weights=traced, stop_at_eos=False):
        first = time.perf_counter() - t0 if first is None else first
        out.append(g.id)
    return out, first, time.perf_counter() - t0


def run_model(
    name: str,
    *,
    new_tokens: int = NEW_TOKENS,
    repeats: int = 3,
    prompt_tokens: int = PROMPT_TOKENS,
    hf: bool = False,
    on_step=lambda done, total, peer: None,
) -> dict:
    """Measure every peer on model ``name`` (with ``hf``: the ``HF_QKV_PEERS`` too); return
    the report ``--json`` prints. ``on_step(done, total, peer)`` follows the runs: first the
    number of runs (total), then each peer's start (done 0) and end (done 1)."""
    from qkv import models

    model = models.load(name)
    if prompt_tokens + new_tokens > model.max_tokens:
        raise TooLong(
            f"a prompt of {prompt_tokens:,} tokens and {new_tokens} new tokens exceed {name}'s "
            f"context of {model.max_tokens:,} tokens: the prompt may have at most "
            f"{model.max_tokens - new_tokens:,} tokens"
        )
    ids = prompt_ids(model, prompt_tokens)
    runners: dict[str, Callable[[], tuple[list[int], float | None, float]]] = {
        p: functools.partial(_qkv_run, model, ids, new_tokens, p == "qkv traced") for p in QKV_PEERS
    }
    skipped: dict[str, str] = {}  # peer: why it did not run
    groups = [(HF_PEERS, hf_llama.missing())]
    if hf:
        groups.append((HF_QKV_PEERS, hf_llama.missing(qkv_attention=True)))
    llama = None
    for peers, why in groups:
        if why is not None:
            skipped |= {p: why for p in peers}
            continue
        if llama is None:
            llama = hf_llama.llama_from(model)
        for p, how in peers.items():
            runners[p] = functools.partial(hf_llama.greedy_run, llama, ids, new_tokens, **how)
    runs: dict[str, list] = {p: [] for p in runners}
    on_step(0, (1 + repeats) * len(runners), "")
    for _ in range(1 + repeats):  # the first round warms up (allocations, threads, caches)
        for p, fn in runners.items():
            on_step(0, None, p)
            runs[p].append(fn())
            on_step(1, None, p)
    rows = [_row(p, runs[p][1:], runs["qkv untraced"][0][0]) for p in runners]
    base = {r["peer"]: r for r in rows}
    for r in rows:
        r["tokens_per_s_vs_untraced"] = r["tokens_per_s"] / base["qkv untraced"]["tokens_per_s"]
    sdpa = base.get("transformers sdpa")
    ratios = {
        "traced_time_over_untraced": base["qkv untraced"]["tokens_per_s"]
        / base["qkv traced"]["tokens_per_s"]
    }
    if sdpa is not None:
        ratios["untraced_tokens_per_s_over_sdpa"] = (
            base["qkv untraced"]["tokens_per_s"] / sdpa["tokens_per_s"]
        )
    for key, top, bottom in HF_RATIOS:
        if top in base and bottom in base:
            ratios[key] = base[top]["tokens_per_s"] / base[bottom]["tokens_per_s"]
    return {
        "model": name,
        "dtype": "float32",
        "prompt_tokens": len(ids),
        "new_tokens": new_tokens,
        "repeats": repeats,
        "results": rows,
        "skipped_peers": skipped,
        "ratios": ratios,
        "tokens_equal": all(r["tokens_equal_untraced"] == r["tokens"] for r in rows),
    }


def _row(peer: str, runs, reference_ids) -> dict:
    """Median timings of one peer's runs (each (ids, first, total))."""
    ids, _, _ = runs[0]
    first = statistics.median(r[1] for r in runs)
    total = statistics.median(r[2] for r in runs)
    decode = statistics.median((len(r[0]) - 1) / (r[2] - r[1]) for r in runs if r[2] > r[1])
    same = int(np.sum(np.asarray(ids) == np.asarray(reference_ids)))
    return {
        "peer": peer,
        "prefill_s": first,
        "decode_tokens_per_s": decode,
        "total_s": total,
        "tokens_per_s": len(ids) / total,
        "tokens_equal_untraced": same,
        "tokens": len(ids),
    }


def render_model(report: dict, console) -> None:
    """The model report as a rich table, one row per peer, then the goal ratios."""
    from rich.markup import escape
    from rich.table import Table

    console.print(
        f"[bold]{report['model']}[/], {report['dtype']}, greedy: a "
        f"{report['prompt_tokens']}-token prompt, {report['new_tokens']} new tokens, "
        f"median of {report['repeats']} runs after a warm-up"
    )
    table = Table()
    for col in ("peer", "prefill", "decode tok/s", "tokens/s", "× untraced", "same tokens"):
        table.add_column(col, justify="left" if col == "peer" else "right", no_wrap=True)
    for r in report["results"]:
        table.add_row(
            r["peer"],
            f"{r['prefill_s'] * 1e3:.1f} ms",
            f"{r['decode_tokens_per_s']:.1f}",
            f"{r['tokens_per_s']:.1f}",
            f"{r['tokens_per_s_vs_untraced']:.2f}",
            f"{r['tokens_equal_untraced']}/{r['tokens']}",
        )
    console.print(table)
    for peer, why in report["skipped_peers"].items():
        console.print(f"[yellow]skipped {peer}[/]: {escape(why)}")  # why holds [extras]
    ratios = report["ratios"]
    if "untraced_tokens_per_s_over_sdpa" in ratios:
        console.print(
            f"qkv untraced tokens/s ÷ transformers sdpa tokens/s: "
            f"[bold]{ratios['untraced_tokens_per_s_over_sdpa']:.2f}×[/]"
        )
    console.print(
        f"qkv traced time ÷ qkv untraced time: [bold]{ratios['traced_time_over_untraced']:.2f}×[/]"
    )
    for key, top, bottom in HF_RATIOS:
        if key in ratios:
            console.print(f"{top} tokens/s ÷ {bottom} tokens/s: [bold]{ratios[key]:.2f}×[/]")
    same = "yes" if report["tokens_equal"] else "[red]no[/]"
    console.print(f"greedy tokens equal across every peer: [bold]{same}[/]")
    console.print(
        "[dim]prefill: seconds to the first new token · decode tok/s: the other "
        "tokens over the time after the first · tokens/s: new tokens over the whole "
        "run · same tokens: positions where the ids equal qkv untraced's[/]"
    )
