"""Temperature: τ → 0 approaches the argmax, τ → ∞ approaches the uniform average."""

from __future__ import annotations

import math

import numpy as np

from qkv.explain import scenes
from qkv.explain.walkthrough import labels
from qkv.lab.result import Result
from qkv.steps import entropy

CLAIM = (
    "lower τ sharpens the weights toward the top-scoring key, higher τ spreads them toward uniform"
)


def run(*, preset: str = scenes.DEFAULT, seed: int = 0, steps: int = 13) -> Result:
    del seed  # deterministic: the preset fixes every number
    scene = scenes.load(preset)
    i = scene.select
    taus = np.geomspace(0.05, 10, steps)
    rows, maxima, effective = [], [], []
    n = len(scene.tokens)
    for tau in taus:
        tr = scene.trace(temperature=float(tau))
        w = tr.weights[i] if scene.n_heads is None else tr.weights[0, i]
        ent = float(entropy(w))
        maxima.append(float(w.max()))
        effective.append(math.exp(ent))
        rows.append(
            [
                float(tau),
                scene.tokens[int(np.argmax(w))],
                float(w.max()),
                ent,
                math.exp(ent),
                *map(float, w),
            ]
        )
    # one column per key: the weight from the query on that key ("w→the@0": key "the" at 0)
    columns = [
        "τ",
        "top key",
        "max w",
        "entropy",
        "effective tokens",
        *[f"w→{key}" for key in labels(scene.tokens, n)],
    ]
    monotone = bool(np.all(np.diff(maxima) <= 1e-12))
    supported = monotone and maxima[0] > 0.95 and effective[-1] > 0.95 * n
    evidence = (
        f"for '{scene.tokens[i]}' in {preset}: max weight {maxima[0]:.3f} at τ = "
        f"{taus[0]:.2f}, effective tokens {effective[-1]:.2f} of {n} at τ = {taus[-1]:g}; "
        f"max weight {'falls' if monotone else 'does not fall'} steadily as τ grows"
    )

    def plot(fig):
        ax = fig.subplots()
        W = np.array([r[5:] for r in rows])
        for j, t in enumerate(scene.tokens):
            ax.semilogx(taus, W[:, j], "o-", label=f"{j}:{t}")
        ax.set_xlabel("τ (temperature)")
        ax.set_ylabel(f"weight from '{scene.tokens[i]}'")
        ax.legend(fontsize=8)

    return Result("temperature", CLAIM, columns, rows, supported, evidence, plot=plot)
