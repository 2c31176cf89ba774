"""The compiled decoding loop (``decode_jit.decode``) with 1 or more query rows per K/V head
(grouped-query attention: SmolLM2 has 3 query heads per K/V head), 3 K/V heads × T keys of a
KVCache's view (d = 64, float32), one call per K/V head as ``kernels/decode.py`` makes them,
timed three ways (the first two on the calling thread):

    in cache    the same layer's K and V every step (what a repeated benchmark step sees)
    from memory 30 layers' K and V in turn, as a 30-layer model reads them (more than the
                last-level cache holds once T is in the thousands)
    2 workers   from memory, the K/V heads shared by two of the kernel's pool threads (2 and
                1, as ``kernels/decode.py`` shares them on a machine of two CPUs)

Before each step the caller spins alone for 300 µs, as a model's thread does its other work
between attention calls (the pool's threads go to sleep meanwhile).

and the K, V bytes each step reads over its median time. Compute per byte grows with the rows
per K/V head; reading from memory does not.

    env PYTHONPATH=src .venv/bin/python benchmarks/decode_rows.py [--T 4000] [--rows 1,3]

Not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from qkv.kernels import compiled
from qkv.kernels.threads import spread

LAYERS = 30
UNITS = 3
IDLE = 300e-6  # seconds the caller works alone before each step (a model's other work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--T", type=int, default=4000)
    parser.add_argument("--rows", default="1,3")
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    loop = compiled.kernels()["decode"]
    T, cap = args.T, 2 * args.T  # a view: the first T keys of a longer buffer
    layers = [rng.standard_normal((2, UNITS, cap, 64), dtype=np.float32) for _ in range(LAYERS)]
    views = [(compiled.read_only(b[0][:, :T]), compiled.read_only(b[1][:, :T])) for b in layers]
    nbytes = UNITS * T * 128 * 4

    def step(q, out, layer: int, units=range(UNITS)) -> None:
        """One decoding step: each K/V head's rows against its keys, one call each."""
        k, v = views[layer]
        for a in units:
            loop(q[a : a + 1], k[a : a + 1], v[a : a + 1], compiled.NO_MASK, False, 1, True,
                 T - 1, out[a : a + 1])  # fmt: skip

    def shared(q, out, layer: int) -> None:
        """The step with its K/V heads on two pool threads (2 and 1)."""
        spread(lambda units: step(q, out, layer, units), [range(0, 2), range(2, UNITS)], 2)

    print(f"{UNITS} K/V heads × {T:,} keys, d = 64, float32: median per step")
    for r in (int(x) for x in args.rows.split(",")):
        q = rng.standard_normal((UNITS, r, 64), dtype=np.float32) * np.float32(0.18)
        out = np.empty((UNITS, r, 64), np.float32)
        cells = []
        ways = (("in cache", step, 1), ("from memory", step, LAYERS), ("2 workers", shared, LAYERS))
        for name, run, layers_read in ways:
            times = []
            for i in range(LAYERS + args.steps):  # the first LAYERS steps warm up
                t1 = time.perf_counter() + IDLE
                while time.perf_counter() < t1:  # the caller's other work: the pool sleeps
                    pass
                t0 = time.perf_counter()
                run(q, out, i % layers_read)
                times.append(time.perf_counter() - t0)
            times = times[LAYERS:]
            median = float(np.median(times))
            cells.append(f"{name} {median * 1e6:5.0f} µs ({nbytes / median / 1e9:4.1f} GB/s)")
        print(f"{r} row{'s' if r > 1 else ' '} per K/V head: " + ", ".join(cells))


if __name__ == "__main__":
    main()
