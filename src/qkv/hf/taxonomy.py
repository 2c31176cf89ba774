"""What each attention head does, as four scores in [0, 1] per head.

All four are measured on sequences of random tokens repeated twice, t_1 … t_T t_1 … t_T, as
in the induction-head literature (random tokens leave only position and repetition as cues):

    previous   mean over queries i ≥ 1 of the first half of w[i, i−1]
    first      mean over queries i ≥ 1 of w[i, 0]: the first token as an attention sink
    duplicate  mean over second-half queries T+t of w[T+t, t]: the earlier copy of its token
    induction  mean over second-half queries T+t (t < T−1) of w[T+t, t+1]: the token that
               followed the earlier copy, what an induction head attends to

``scores(weights, T)`` computes them from weights (B, n_layers, H, 2T, 2T); ``measure`` runs a
model: a transformers model computed by qkv (``attn_implementation="qkv"``) or a bundled
``qkv.models`` model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qkv.explain.head_kinds import KINDS, MEANINGS  # noqa: F401  (MEANINGS: for callers)


@dataclass
class HeadScores:
    """Per-head scores (n_layers, n_heads) by kind (``KINDS``), and how they were measured."""

    previous: np.ndarray
    first: np.ndarray
    duplicate: np.ndarray
    induction: np.ndarray
    half: int  # T, tokens before the repeat
    sequences: int

    def top(self, kind: str, k: int = 5) -> list[tuple[int, int, float]]:
        """The k highest-scoring heads of one kind as (layer, head, score)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        a = getattr(self, kind)
        order = np.argsort(a, axis=None)[::-1][:k]
        return [(int(i // a.shape[1]), int(i % a.shape[1]), float(a.flat[i])) for i in order]


def repeated_random_tokens(n: int, half: int, *, low: int, high: int, rng) -> np.ndarray:
    """(n, 2·half) ids: each row ``half`` distinct random ids from [low, high), then again."""
    if high - low < half:
        raise ValueError(f"need at least {half} token ids to draw from, got [{low}, {high})")
    first = np.stack(
        [rng.choice(np.arange(low, high), size=half, replace=False) for _ in range(n)]
    )  # (n, T)
    return np.concatenate([first, first], axis=1)  # (n, 2T)


def scores(weights, half: int, *, sequences: int | None = None) -> HeadScores:
    """The four scores from weights (B, n_layers, H, 2T, 2T) on repeated random tokens."""
    w = np.asarray(weights, dtype=np.float64)
    T = half
    if w.ndim != 5 or w.shape[-1] != 2 * T or w.shape[-2] != 2 * T:
        raise ValueError(
            f"weights must be (B, n_layers, n_heads, 2T, 2T) with T = {T}, got shape {w.shape}"
        )
    i = np.arange(1, T)  # first-half queries with a previous token
    t = np.arange(0, T)
    return HeadScores(
        previous=w[..., i, i - 1].mean(axis=(0, -1)),
        first=w[..., 1:, 0].mean(axis=(0, -1)),
        duplicate=w[..., T + t, t].mean(axis=(0, -1)),
        induction=w[..., T + t[:-1], t[:-1] + 1].mean(axis=(0, -1)),
        half=T,
        sequences=sequences or w.shape[0],
    )


def measure(model, *, half: int = 20, sequences: int = 4, seed: int = 0) -> HeadScores:
    """Scores of every head of ``model`` on ``sequences`` repeated random sequences of 2·half
    tokens drawn with ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    vocab = _vocab_size(model)
    low = 100 if vocab > 1000 else 3  # skip the special and byte tokens at the start
    ids = repeated_random_tokens(sequences, half, low=low, high=vocab, rng=rng)
    if hasattr(model, "weights_of_ids"):  # a bundled qkv model
        weights = model.weights_of_ids(ids)
    else:
        weights = _hf_weights(model, ids)
    return scores(weights, half, sequences=sequences)


def _vocab_size(model) -> int:
    config = getattr(model, "config", None)
    if config is not None:
        return int(getattr(config, "vocab_size", None) or config.get_text_config().vocab_size)
    return int(model.E_token.shape[0])


def _hf_weights(model, ids) -> np.ndarray:
    import torch

    from qkv.hf.tracing import trace

    with torch.no_grad(), trace(model) as run:
        model(input_ids=torch.as_tensor(ids))
    layers = run.calls[0]
    return np.stack([np.asarray(layers[i]["weights"]) for i in sorted(layers)], axis=1)
