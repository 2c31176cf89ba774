"""Name what a head does from its attention weights: the classic patterns of real models.

For a head's weights W (L, L), averaged over the queries where the pattern is defined:
    first  W[i, 0]        everything piles onto the first token (an "attention sink")
    last   W[i, L−1]      onto the final token ([SEP] in BERT)
    prev   W[i, i−1]      the previous token
    self   W[i, i]        the token itself
    next   W[i, i+1]      the next token (encoders only: a causal head cannot see it)
A head whose strongest pattern holds less than half its weight is "mixed".
"""

from __future__ import annotations

import numpy as np

PATTERNS = ("first", "last", "prev", "self", "next")
THRESHOLD = 0.5
MEANINGS = {  # what a grid cell's name says about the head, for legends and help
    "first": "weight on the first token (an attention sink)",
    "last": "weight on the last token ([SEP] in an encoder)",
    "prev": "weight on the token just before the query",
    "self": "weight on the query's own token",
    "next": "weight on the token just after (an encoder only: a causal head cannot see it)",
    "mixed": f"no pattern gets {THRESHOLD:g} of the weight; the number is the strongest one's",
}
CELL = (
    'a cell such as "first .93" names the head\'s strongest pattern and the weight it '
    "gets, averaged over the queries (1.0 = all of it, on every query)"
)


def legend() -> list[str]:
    """The grid's key: what a cell says, then one line per pattern name."""
    return [CELL + ":", *(f"  {name:<5}  {text}" for name, text in MEANINGS.items())]


def scores(W: np.ndarray) -> dict[str, float]:
    """Mean weight each pattern receives in W (L, L); NaN where undefined (L too small)."""
    W = np.asarray(W, dtype=np.float64)
    L = W.shape[-1]
    if W.shape != (L, L):
        raise ValueError(f"expected square weights (L, L), got shape {W.shape}")
    i = np.arange(L)
    rest = i[1:]  # queries after the first: position 0 trivially attends to itself
    out = {
        "first": W[rest, 0].mean() if L > 1 else np.nan,
        "last": W[i[:-1], L - 1].mean() if L > 1 else np.nan,
        "prev": W[rest, rest - 1].mean() if L > 1 else np.nan,
        "self": W[rest, rest].mean() if L > 1 else np.nan,
        "next": W[i[:-1], i[:-1] + 1].mean() if L > 1 else np.nan,
    }
    return {k: float(v) for k, v in out.items()}


def label(W: np.ndarray) -> tuple[str, float]:
    """(pattern name, its mean weight) of the strongest pattern, or ("mixed", that weight)."""
    s = {k: v for k, v in scores(W).items() if not np.isnan(v)}
    if not s:
        return "mixed", float("nan")
    name = max(s, key=s.get)
    return (name if s[name] >= THRESHOLD else "mixed"), s[name]


def grid(weights: np.ndarray) -> list[list[tuple[str, float]]]:
    """Labels for every head of every layer: weights (n_layers, n_heads, L, L)."""
    return [[label(head) for head in layer] for layer in weights]
