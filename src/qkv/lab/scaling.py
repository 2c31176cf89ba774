"""Why divide by √d_k: the spread of q·k, softmax saturation, and the gradient through softmax."""

from __future__ import annotations

import math

import numpy as np

from qkv import steps
from qkv.lab.result import Result, loglog_panels

CLAIM = (
    "q·k of random unit-variance vectors spreads like √d_k; without ÷√d_k the softmax "
    "saturates and the gradient reaching the scores vanishes"
)
DIMS = (4, 16, 64, 256, 1024, 4096)


def score_gradients(scores, upstream):
    """∂L/∂s for a loss with ∂L/∂w = upstream, through w = softmax(s): w ⊙ (g − w·g)."""
    w = steps.softmax(scores)
    return w * (upstream - np.sum(w * upstream, axis=-1, keepdims=True))


def run(*, seed: int = 0, pairs: int = 4000, T: int = 1024, queries: int = 16) -> Result:
    rng = np.random.default_rng(seed)
    rows = []
    for d in DIMS:
        q, k = rng.standard_normal((pairs, d)), rng.standard_normal((pairs, d))
        dots = np.einsum("nd,nd->n", q, k)  # (pairs,) independent q·k samples
        Q = rng.standard_normal((queries, d))
        K = rng.standard_normal((T, d))
        raw = Q @ K.T  # (queries, d) @ (d, T) -> (queries, T)
        g = rng.standard_normal((queries, T))  # an upstream gradient ∂L/∂w
        row = [d, math.sqrt(d), float(dots.std()), float((dots / math.sqrt(d)).std())]
        for s in (raw, raw / math.sqrt(d)):
            w = steps.softmax(s)
            typical = np.median(np.abs(score_gradients(s, g)), axis=-1)  # per query
            row += [float(w.max(-1).mean()), float(steps.entropy(w).mean()), float(typical.mean())]
        rows.append(row)
    columns = [
        "d_k",
        "√d_k",
        "std q·k",
        "std q·k/√d_k",
        "max w (raw)",
        "entropy (raw)",
        "median |∂L/∂s_j| (raw)",
        "max w (scaled)",
        "entropy (scaled)",
        "median |∂L/∂s_j| (scaled)",
    ]
    a = np.array(rows)
    # the curves of the picture: (values, style, label) per panel
    spread = [
        (a[:, 2], "o-", "std q·k"),
        (a[:, 3], "s-", "std q·k / √d_k"),
        (a[:, 1], "k:", "√d_k"),
    ]
    gradients = [(a[:, 6], "o-", "raw"), (a[:, 9], "s-", "÷√d_k")]
    spread_ok = np.all(np.abs(a[:, 2] / a[:, 1] - 1) < 0.1) and np.all(np.abs(a[:, 3] - 1) < 0.1)
    big = a[-1]
    saturates = big[4] > 0.9 and big[7] < 0.1 and big[6] < 1e-3 * big[9]
    evidence = (
        f"std q·k/√d_k stays in {a[:, 3].min():.2f}–{a[:, 3].max():.2f}; at d_k = "
        f"{int(big[0])} the raw softmax puts {big[4]:.2f} on one key of {T} and passes "
        f"a typical key a gradient of {big[6]:.1e}; scaled: {big[7]:.3f} and {big[9]:.1e}"
    )

    def plot(fig):
        panels = [("spread of the scores", spread), (f"median |∂L/∂s_j| over {T} keys", gradients)]
        loglog_panels(fig, a[:, 0], "d_k", panels)

    return Result(
        "scaling", CLAIM, columns, rows, bool(spread_ok and saturates), evidence, plot=plot
    )
