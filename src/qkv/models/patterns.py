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
    near = {n: np.full(L, np.nan) for n in ("previous", "next")}
    near["previous"][1:], near["next"][:-1] = W[i[1:], i[:-1]], W[i[:-1], i[1:]]
    rows = {"first": W[:, 0], "last": W[:, L - 1], "self": W[i, i], **near}
    return scores_of_rows(rows)


def scores_of_rows(rows: dict) -> dict[str, float]:
    """Mean weight each pattern receives, from each query's weight on the first and last key,
    the previous token, itself and the next token (``Trace.head_stats``: (L,) each, NaN where
    the key does not exist). Query 0 counts for neither first, prev nor self (it can only see
    itself in a causal head); the last query for neither last nor next."""
    L = len(rows["first"])
    if L < 2:
        return {name: float("nan") for name in PATTERNS}
    mean = {"first": slice(1, None), "last": slice(None, -1), "prev": slice(1, None)}
    mean.update({"self": slice(1, None), "next": slice(None, -1)})
    key = {"prev": "previous"}
    return {
        n: float(np.mean(np.asarray(rows[key.get(n, n)], np.float64)[at])) for n, at in mean.items()
    }


def label(W: np.ndarray) -> tuple[str, float]:
    """(pattern name, its mean weight) of the strongest pattern, or ("mixed", that weight)."""
    return label_of_scores(scores(W))


def label_of_scores(scores_: dict[str, float]) -> tuple[str, float]:
    """The strongest of the ``scores`` (name -> mean weight): (name, weight), or ("mixed",
    weight) below the threshold."""
    s = {k: v for k, v in scores_.items() if not np.isnan(v)}
    if not s:
        return "mixed", float("nan")
    name = max(s, key=lambda k: s[k])
    return (name if s[name] >= THRESHOLD else "mixed"), s[name]


def grid(weights: np.ndarray) -> list[list[tuple[str, float]]]:
    """Labels for every head of every layer: weights (n_layers, n_heads, L, L)."""
    return [[label(head) for head in layer] for layer in weights]


def run_scores(run) -> list[list[dict[str, float]]]:
    """Pattern scores of every head of every layer of a model run, read from each head's
    statistics block by block (``Trace.head_stats``): no (L, L) array of weights is held."""
    out = []
    for i in sorted(run.layers):
        stats = run.layers[i].head_stats()  # name -> (n_heads, L)
        out.append(
            [
                scores_of_rows({n: a[h] for n, a in stats.items()})
                for h in range(len(stats["first"]))
            ]
        )
    return out
