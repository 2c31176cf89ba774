"""Computation exercises: a score q·k, which key wins, a tiny scene's output z, a softmax,
and what τ → 0 or τ → ∞ does to a row. Every answer is computed by ``qkv.attention`` / ``qkv.steps``;
the worked solutions reuse the walkthrough's number formatting (``qkv.explain``).
"""

from __future__ import annotations

import numpy as np

from qkv import steps
from qkv.attention import attention, attention_weights
from qkv.explain.walkthrough import dot_terms, fmt, vec
from qkv.practice.exercise import choice

WORDS = ("the", "cat", "sat", "mat", "dog", "ran", "bank", "river", "money", "it", "was", "red")


def _small(rng, shape, lo: int = -20, hi: int = 20) -> np.ndarray:
    """Numbers with one decimal in [lo/10, hi/10] (easy to multiply by hand)."""
    return rng.integers(lo, hi + 1, size=shape) / 10.0


def _tokens(rng, n: int) -> list[str]:
    return [str(w) for w in rng.choice(WORDS, size=n, replace=False)]


def dot(rng) -> dict:
    d = int(rng.choice((2, 3, 4)))
    q, k = _small(rng, (1, d)), _small(rng, (1, d))
    scaled = bool(rng.random() < 0.4)
    _, trace = attention(q, k, k, return_trace=True)  # one query, one key
    raw = float(trace.steps["scores"][0, 0])
    answer = float(trace.steps["scaled"][0, 0]) if scaled else raw
    lines = [f"q·k = {dot_terms(q[0], k[0])}"]
    if scaled:
        lines.append(f"scaled = q·k ÷ √d_k = {fmt(raw, 3)} ÷ √{d} = {fmt(answer, 3)}")
    what = "the scaled score q·k ÷ √d_k" if scaled else "the score q·k (no scaling)"
    return dict(
        prompt=f"q = {vec(q[0], 1)}, k = {vec(k[0], 1)}. What is {what}?",
        answer_type="number",
        answer=answer,
        tol=0.01,
        hint="Multiply the vectors entry by entry and add the products"
        + (f", then divide by √{d}." if scaled else "."),
        solution=tuple(lines),
        data={"q": q[0].tolist(), "k": k[0].tolist(), "scaled": scaled},
    )


def winner(rng) -> dict:
    n, d = int(rng.integers(3, 5)), int(rng.choice((2, 3)))
    for _ in range(100):  # a clear winner: at least 0.05 more weight than the runner-up
        q, K = _small(rng, (1, d)), _small(rng, (n, d))
        w = attention_weights(q, K)[0]  # (n,)
        top = np.sort(w)[::-1]
        if top[0] - top[1] >= 0.05:
            break
    tokens = _tokens(rng, n)
    _, trace = attention(q, K, K, return_trace=True)
    scores = trace.steps["scores"][0]
    best = int(np.argmax(w))
    lines = [f"{tokens[j]}: q·k = {dot_terms(q[0], K[j])}" for j in range(n)]
    lines += [
        f"scaled (÷ √{d}) = {vec(trace.steps['scaled'][0], 3)}",
        f"weights = softmax(scaled) = {vec(w, 3)}",
        f"the largest score always gets the most weight: {tokens[best]} ({fmt(w[best], 3)})",
    ]
    keys = "\n".join(f"  k({t}) = {vec(K[j], 1)}" for j, t in enumerate(tokens))
    return choice(
        f"A query q = {vec(q[0], 1)} meets {n} keys:\n{keys}\n"
        f"Which key gets the most attention weight?",
        best,
        tuple(tokens),
        "Softmax keeps the order of the scores: find the largest q·k.",
        tuple(lines),
        {"q": q[0].tolist(), "K": K.tolist(), "tokens": tokens, "scores": scores.tolist()},
    )


def output(rng) -> dict:
    n = int(rng.integers(2, 4))
    d = 2
    q, K, V = _small(rng, (1, d)), _small(rng, (n, d)), _small(rng, (n, d))
    tokens = _tokens(rng, n)
    z, trace = attention(q, K, V, return_trace=True)
    w = trace.steps["weights"][0]
    terms = trace.contributions(0)  # (n, d_v)
    lines = [
        f"scaled scores = q·k ÷ √2 = {vec(trace.steps['scaled'][0], 3)}",
        f"weights = softmax(scaled) = {vec(w, 3)}",
    ]
    lines += [
        f"{fmt(w[j], 3)} × v({t}) {vec(V[j], 1)} = {vec(terms[j], 3)}" for j, t in enumerate(tokens)
    ]
    lines.append(f"z = sum of those rows = {vec(z[0], 3)}")
    rows = "\n".join(f"  {t}: k = {vec(K[j], 1)}, v = {vec(V[j], 1)}" for j, t in enumerate(tokens))
    return dict(
        prompt=f"One query q = {vec(q[0], 1)} attends (scaled by 1/√2) over {n} tokens:\n{rows}\n"
        f"What is the output z = Σ w_j·v_j?",
        answer_type="vector",
        answer=tuple(float(x) for x in z[0]),
        tol=0.02,
        hint="Scores q·k ÷ √2 → softmax → weights; then add up each v scaled by its weight.",
        solution=tuple(lines),
        data={"q": q[0].tolist(), "K": K.tolist(), "V": V.tolist(), "tokens": tokens},
    )


def softmax(rng) -> dict:
    x = rng.integers(-2, 4, size=3).astype(float)
    tau = float(rng.choice((1.0, 1.0, 0.5, 2.0)))
    j = int(rng.integers(3))
    p = steps.softmax(steps.temper(x, tau))  # (3,)
    e = np.exp(x / tau)
    tau_txt = "" if tau == 1 else f" at temperature τ = {tau:g}"
    lines = [
        f"e^(x/τ) = [{', '.join(f'{v:.3f}' for v in e)}], sum = {e.sum():.3f}",
        f"p = e^(x/τ) ÷ sum = {vec(p, 3)}",
        f"p[{j}] = {e[j]:.3f} ÷ {e.sum():.3f} = {fmt(p[j], 3)}",
    ]
    return dict(
        prompt=f"softmax([{', '.join(f'{v:g}' for v in x)}]){tau_txt}: what is the "
        f"probability of entry {j} (counting from 0, x[{j}] = {x[j]:g})?",
        answer_type="number",
        answer=float(p[j]),
        tol=0.01,
        hint="p_j = e^(x_j/τ) ÷ Σ_i e^(x_i/τ); e ≈ 2.718, e² ≈ 7.389, e³ ≈ 20.09.",
        solution=tuple(lines),
        data={"x": x.tolist(), "tau": tau, "j": j},
    )


LIMIT_CHOICES = (
    "all the weight goes to the largest score (one-hot)",
    "every key gets the same weight 1/n",
    "nothing changes: softmax ignores τ",
    "every weight goes to 0",
)


def temperature_limit(rng) -> dict:
    for _ in range(100):
        x = rng.integers(-3, 4, size=4).astype(float)
        top = np.sort(x)[::-1]
        if top[0] > top[1]:
            break
    cold = bool(rng.random() < 0.5)
    taus = (1.0, 0.1, 0.01) if cold else (1.0, 10.0, 100.0)
    rows = [steps.softmax(steps.temper(x, t)) for t in taus]
    w = rows[-1]
    if w.max() > 0.99:
        answer = 0
    elif w.max() - w.min() < 0.05:
        answer = 1
    else:
        raise AssertionError(f"τ = {taus[-1]} gave neither a one-hot nor a flat row: {w}")
    lines = [f"τ = {t:g}: weights = {vec(r, 3)}" for t, r in zip(taus, rows, strict=False)]
    lines.append(
        "dividing by a tiny τ stretches the gaps between scores until the largest dominates"
        if cold
        else "dividing by a huge τ squeezes every score toward 0, and softmax of equal "
        "scores is uniform"
    )
    return choice(
        f"The scores of one query are [{', '.join(f'{v:g}' for v in x)}]. What do its "
        f"weights softmax(scores ÷ τ) become as τ → {'0' if cold else '∞'}?",
        answer,
        LIMIT_CHOICES,
        "Look at the gaps between scores after dividing by τ.",
        tuple(lines),
        {"x": x.tolist(), "tau_to": "0" if cold else "inf"},
    )


SCORES = {"scores/dot": dot, "scores/winner": winner, "scores/output": output}
SOFTMAX = {"softmax/softmax": softmax, "softmax/temperature": temperature_limit}
