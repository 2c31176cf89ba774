"""Independent float64 references for the web tests: attention written out with NumPy einsum,
softmax by hand, never through qkv.steps."""

from __future__ import annotations

import numpy as np


def softmax_rows(s: np.ndarray, visible: np.ndarray) -> np.ndarray:
    s = np.where(visible, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def single_head(x, W_Q, W_K, W_V, *, tau=1.0, scaled=True, causal=False):
    """weights (L, S) and z (L, d_v) for one head with 2-D weights."""
    q = np.einsum("ld,de->le", x, W_Q)
    k = np.einsum("sd,de->se", x, W_K)
    v = np.einsum("sd,de->se", x, W_V)
    s = np.einsum("le,se->ls", q, k)
    if scaled:
        s = s / np.sqrt(q.shape[1])
    L, S = s.shape
    visible = np.tril(np.ones((L, S), bool)) if causal else np.ones((L, S), bool)
    w = softmax_rows(s / tau, visible)
    return w, np.einsum("ls,se->le", w, v)


def multi_head(x, W_Q, W_K, W_V, W_O, b_O, *, tau=1.0, causal=False):
    """weights (H, L, S), z (H, L, d_v), out (L, d_model) with 3-D weights."""
    ws, zs = zip(
        *(
            single_head(x, W_Q[h], W_K[h], W_V[h], tau=tau, causal=causal)
            for h in range(W_Q.shape[0])
        ),
        strict=False,
    )
    w, z = np.stack(ws), np.stack(zs)
    out = np.einsum("hle,hem->lm", z, W_O) + b_O
    return w, z, out
