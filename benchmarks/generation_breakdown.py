"""Where a SmolLM2 decoding step's time goes, per new token after a prompt of --prompt tokens
(the benchmark text's ids repeated, as ``qkv bench --model --prompt`` makes them):

    layers      the compiled token step through the 30 blocks (``models/token_step.py``:
                products, attention, norms, RoPE, MLP, the cache's append)
    products    the packed weight products called from Python (``Packed.times``: the logits'
                product; every product with --numpy-path)
    attention   the model's ``qkv.attention`` calls (with --numpy-path: checks, dispatch and
                the decoding kernel of every layer; the compiled step's own calls to the
                engine, where the loop does not apply, count in "layers")
    rest        the embedding's row, the RoPE angles, the final norm, the generator, and with
                --numpy-path the norms, RoPE, the cache, head reshapes and the activation

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=src .venv/bin/python \\
        benchmarks/generation_breakdown.py [--prompt 32] [--new 64] [--runs 3] [--numpy-path]

Each run times its decoding steps (the tokens after the first) with a clock around each part;
the clocks' own cost (about a microsecond a call) counts in their share. Not a test: nothing
asserts a time.
"""

from __future__ import annotations

import argparse
import time

from qkv import models
from qkv.bench import generation
from qkv.models import quantized, smollm2, token_step


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
    parser.add_argument(
        "--numpy-path", action="store_true", help="every token by the model's NumPy path"
    )
    args = parser.parse_args()
    model = models.load("smollm2-135m")
    ids = generation.prompt_ids(model, args.prompt)
    parts = {  # (module or class, attribute): what a clock is put around
        "layers": (token_step, "step"),
        "products": (quantized.Packed, "times"),
        "attention": (smollm2, "attention"),
    }
    original = {name: getattr(*where) for name, where in parts.items()}
    real = dict(original)
    if args.numpy_path:
        real["layers"] = lambda *args, **kwargs: None  # never applies: the NumPy path
    path = "the NumPy path" if args.numpy_path else "the compiled token step"
    print(
        f"smollm2-135m, a {len(ids):,}-token prompt, {args.new} new tokens, {path}: "
        "ms per decoded token"
    )
    for run in range(args.runs + 1):  # the first warms up
        steps = model.generate_ids(ids, args.new, stop_at_eos=False)
        next(steps)  # the prompt's pass and the first token
        spent = dict.fromkeys(parts, 0.0)
        for name, where in parts.items():
            setattr(*where, clocked(real[name], spent, name))
        try:
            t0 = time.perf_counter()
            for _ in steps:
                pass
            total = time.perf_counter() - t0
        finally:
            for name, where in parts.items():
                setattr(*where, original[name])
        if run:
            n = args.new - 1
            cells = [f"{name} {spent[name] / n * 1e3:5.2f}" for name in parts]
            rest = total - sum(spent.values())
            print(
                f"run {run}: {total / n * 1e3:6.2f} ms ({n / total:5.1f} tokens/s) = "
                + " + ".join(cells)
                + f" + rest {rest / n * 1e3:5.2f}"
            )


if __name__ == "__main__":
    main()
