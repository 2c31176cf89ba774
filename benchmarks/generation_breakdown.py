"""Where a SmolLM2 decoding step's time goes: the packed weight products (``Packed.times``, the
compiled loops of ``models/quantized_jit.py``), the attention calls (``qkv.attention``:
checks, dispatch and the decode kernel), and the rest (norms, RoPE, the cache, head
reshapes, the MLP's activation, the generator), per new token after a prompt of --prompt
tokens (the benchmark text's ids repeated, as ``qkv bench --model --prompt`` makes them).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=src .venv/bin/python \\
        benchmarks/generation_breakdown.py [--prompt 32] [--new 64] [--runs 3]

Each run times its decoding steps (the tokens after the first) with a clock around the products
and the attention calls; the clocks' own cost (about a microsecond a call) counts in their
share. Not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import time

from qkv import models
from qkv.bench import generation
from qkv.models import quantized, smollm2


def clocked(fn, spent: dict, name: str):
    """fn, adding the seconds of each call to spent[name]."""

    def run(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - t0

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    model = models.load("smollm2-135m")
    ids = generation.prompt_ids(model, args.prompt)
    spent = {"products": 0.0, "attention": 0.0}
    times, attention = quantized.Packed.times, smollm2.attention
    print(f"smollm2-135m, a {len(ids):,}-token prompt, {args.new} new tokens: ms per decoded token")
    for run in range(args.runs + 1):  # the first warms up
        steps = model.generate_ids(ids, args.new, stop_at_eos=False)
        next(steps)  # the prompt's pass and the first token
        quantized.Packed.times = clocked(times, spent, "products")
        smollm2.attention = clocked(attention, spent, "attention")
        spent.update(products=0.0, attention=0.0)
        try:
            t0 = time.perf_counter()
            for _ in steps:
                pass
            total = time.perf_counter() - t0
        finally:
            quantized.Packed.times, smollm2.attention = times, attention
        if run:
            n = args.new - 1
            rest = total - spent["products"] - spent["attention"]
            print(
                f"run {run}: {total / n * 1e3:6.2f} ms ({n / total:5.1f} tokens/s) = products "
                f"{spent['products'] / n * 1e3:5.2f} + attention {spent['attention'] / n * 1e3:5.2f}"
                f" + rest {rest / n * 1e3:5.2f}"
            )


if __name__ == "__main__":
    main()
