"""SmolLM2-135M speed: a 32-token prompt traced through all 30 layers, and generation tokens/s.

    .venv/bin/python benchmarks/models_speed.py [--threads N] [--runs 3] [--no-transformers]

Goals (issue 5): trace < 3 s, generation >= 10 tokens/s on this CPU. With transformers
installed (dev only) the same prompt is timed there too (float32, eager attention). Timings
warm up once, then report the median of --runs. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

PROMPT = ("Attention lets every token look at every other token: the query of one word is "
          "compared with the keys of all the words before it, and the softmax of those scores "
          "mixes their values into a new vector for that word.")
N_TOKENS, NEW_TOKENS = 32, 32


def median_time(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads (default: library's)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-transformers", action="store_true")
    args = ap.parse_args()
    if args.threads:  # must be set before NumPy (and its BLAS) is imported
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    import numpy as np

    from qkv import models

    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (a shared machine "
          f"reads slower), BLAS threads {args.threads or 'default'}")
    t = time.perf_counter()
    m = models.load("smollm2-135m")
    print(f"load (read GGUF, dequantize Q4_1 → float32): {time.perf_counter() - t:.2f} s")
    ids = m.encode(PROMPT)[0][:N_TOKENS]
    text = m.tokenizer.decode(ids)
    assert len(m.encode(text)[0]) == N_TOKENS, "prompt must be exactly 32 tokens"

    trace_s = median_time(lambda: m.trace(text), args.runs)
    print(f"qkv trace, {N_TOKENS} tokens × 30 layers, every step kept: {trace_s:.3f} s "
          f"(goal < 3 s)")

    def gen():
        stamps = []
        for _ in m.generate(text, NEW_TOKENS):
            stamps.append(time.perf_counter())
        return stamps

    gen()
    rates, totals = [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        stamps = gen()
        totals.append(len(stamps) / (stamps[-1] - t0))
        rates.append((len(stamps) - 1) / (stamps[-1] - stamps[0]))
    print(f"qkv generate, {NEW_TOKENS} new tokens after the prompt: "
          f"{statistics.median(rates):.1f} tokens/s decoding, "
          f"{statistics.median(totals):.1f} tokens/s with the prefill (goal >= 10)")

    if args.no_transformers:
        return
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError:
        print("transformers not installed: no comparison")
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    from qkv.models.packages import data_file
    from qkv.models.smollm2 import FILE, PACKAGE

    path = data_file(PACKAGE, FILE, model="smollm2-135m")
    hf = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                              attn_implementation="eager",
                                              dtype=torch.float32).eval()
    x = torch.tensor([ids])

    def hf_trace():
        with torch.no_grad():
            hf(input_ids=x, output_attentions=True)

    def hf_gen():
        with torch.no_grad():
            hf.generate(x, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                        do_sample=False, pad_token_id=m.eos_id)

    print(f"transformers forward with attentions, same {N_TOKENS} tokens: "
          f"{median_time(hf_trace, args.runs):.3f} s")
    print(f"transformers generate, {NEW_TOKENS} new tokens: "
          f"{NEW_TOKENS / median_time(hf_gen, args.runs):.1f} tokens/s with the prefill")


if __name__ == "__main__":
    sys.exit(main())
