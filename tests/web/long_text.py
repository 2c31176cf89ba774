"""A text of exactly n tokens for a model, from repeated sentences (the zoom views' tests and
benchmarks/zoom_redraw.py trace it), and the float64 weights of one head to check against."""

from __future__ import annotations

import numpy as np

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "A small bird sang in the old oak tree near the river.",
    "She opened the window and the cold wind filled the room.",
    "Numbers in a table are easier to read than numbers in a paragraph.",
)


def text_of(model, n: int) -> str:
    """The longest prefix (in words) of the sentences, repeated, that has n tokens; exactly n
    (a ValueError if no prefix has)."""
    words = " ".join(SENTENCES[i % len(SENTENCES)] for i in range(n)).split(" ")
    lo, hi = 1, len(words)
    while lo < hi:  # the most words whose text has at most n tokens
        mid = (lo + hi + 1) // 2
        if len(model.encode(" ".join(words[:mid]), limit=10**9)[0]) <= n:
            lo = mid
        else:
            hi = mid - 1
    text = " ".join(words[:lo])
    got = len(model.encode(text, limit=10**9)[0])
    if got != n:
        raise ValueError(f"no prefix of the sentences has {n} tokens (nearest: {got})")
    return text


def reference_weights(layer, head: int, rows: slice, *, tau: float = 1.0) -> np.ndarray:
    """Rows of one head's weights in float64 from the layer trace's q and k (after RoPE):
    softmax(q·kᵀ/√d_k/τ) with later keys masked when the layer is causal."""
    s = layer.settings
    g = head * s["n_kv_heads"] // s["n_heads"]  # the query head's K/V head
    q = np.asarray(layer["q"][head][rows], dtype=np.float64)  # (rows, d_k)
    k = np.asarray(layer["k"][g], dtype=np.float64)  # (S, d_k)
    scores = q @ k.T * s["scale"] / tau  # (rows, S)
    if s["causal"]:
        pos = np.arange(s["L"])[rows][:, None]
        scores = np.where(np.arange(s["S"])[None, :] <= pos, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
