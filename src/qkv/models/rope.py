"""Rotary position embedding (RoPE), the "half-split" form of Llama-family checkpoints.

Each head's vector is cut into halves a = x[:d/2], b = x[d/2:]; pair i turns by the angle
θ_i·p for position p, with θ_i = base^(−2i/d):

    rope(x, p) = [a·cos(θp) − b·sin(θp),  b·cos(θp) + a·sin(θp)]

A query at position p and a key at position r then score (rope(q,p)·rope(k,r)), which depends
on p and r only through p − r: attention sees relative position.
"""

from __future__ import annotations

import numpy as np


def angles(positions, d_head: int, *, base: float) -> np.ndarray:
    """θ_i·p for every position p and pair i, float64: (L,) -> (L, d_head/2)."""
    if d_head % 2:
        raise ValueError(f"RoPE needs an even head size, got d_head={d_head}")
    inv_freq = base ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)  # (d_head/2,)
    p = np.asarray(positions, dtype=np.float64)
    return p[:, None] * inv_freq[None, :]  # (L, 1) * (1, d_head/2) -> (L, d_head/2)


def rotate(x: np.ndarray, positions, *, base: float) -> np.ndarray:
    """rope(x, p) for x (..., L, d_head) at positions (L,); returns x's shape and dtype."""
    L, d = x.shape[-2], x.shape[-1]
    if len(positions) != L:
        raise ValueError(
            f"need one position per row of x, got {len(positions)} positions for x {tuple(x.shape)}"
        )
    return turn(x, *cos_sin(positions, d, base=base, dtype=x.dtype))


def cos_sin(positions, d_head: int, *, base: float, dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos(θp), sin(θp) in ``dtype``: (L,) -> (L, d_head/2) each; compute once per forward
    pass and share across layers with ``turn``."""
    theta = angles(positions, d_head, base=base)  # (L, d/2)
    return np.cos(theta).astype(dtype), np.sin(theta).astype(dtype)


def turn(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """rope(x) from precomputed cos, sin (L, d/2): (..., L, d_head) -> (..., L, d_head)."""
    d = x.shape[-1]
    a, b = x[..., : d // 2], x[..., d // 2 :]  # (..., L, d/2) each
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)  # (..., L, d_head)
