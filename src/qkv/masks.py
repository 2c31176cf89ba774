"""Boolean attention masks. Polarity everywhere in qkv: True = may attend.

Masks are built from position indices (``arange`` comparisons), combined with AND,
and applied once by the engine as ``where(mask, s, -inf)``.
"""

from __future__ import annotations

import numpy as np

ALIGNMENTS = ("bottom-right", "top-left")


def causal(L: int, S: int | None = None, align: str = "bottom-right") -> np.ndarray:
    """Causal mask of shape (L, S).

    ``bottom-right`` (the default): query i sees keys j <= i + (S - L), i.e. the L queries are
    the last L positions of the S keys, which is what decoding against a KV cache needs.
    ``top-left``: query i sees keys j <= i. For L == S both are the usual lower triangle.
    """
    S = L if S is None else S
    _check_size("L", L)
    _check_size("S", S)
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    offset = S - L if align == "bottom-right" else 0
    i = np.arange(L)[:, None]  # (L, 1)
    j = np.arange(S)[None, :]  # (1, S)
    return j <= i + offset  # (L, S)


def alibi(L: int, S: int | None = None, slope: float = 0.5) -> np.ndarray:
    """ALiBi's position bias, shape (L, S): bias[i, j] = −slope·|pos_i − j|, the queries being
    the last L of the S positions (pos_i = i + S − L, as ``causal``'s bottom-right alignment).
    Added to the scores (``bias=``), it makes far keys less likely without a hard mask; with a
    causal mask it is ALiBi's −m·(i − j) (Press et al., BLOOM, MPT). slope ≥ 0, finite."""
    S = L if S is None else S
    _check_size("L", L)
    _check_size("S", S)
    if isinstance(slope, bool) or not isinstance(slope, (int, float, np.floating, np.integer)):
        raise TypeError(f"slope must be a number ≥ 0, got {slope!r}")
    if not (np.isfinite(slope) and slope >= 0):
        raise ValueError(f"slope must be finite and ≥ 0, got {slope}")
    farthest = max(L, S) - 1  # the largest |pos_i − j|
    if farthest and not np.isfinite(float(slope) * farthest):
        raise ValueError(
            f"ALiBi slope {slope:g} × the largest distance {farthest} overflows float64; "
            f"use a slope ≤ {np.finfo(np.float64).max / farthest:.3g}"
        )
    pos = np.arange(L)[:, None] + (S - L)  # (L, 1)
    return -float(slope) * np.abs(pos - np.arange(S)[None, :])  # (L, S)


def padding(lengths, S: int) -> np.ndarray:
    """Key-padding mask of shape (B, 1, S): key j of sequence b is real when j < lengths[b].

    The middle axis broadcasts over the L queries; add an axis (``mask[:, None]``) to broadcast
    over heads as well.
    """
    _check_size("S", S)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise TypeError(
            f"lengths must be a 1-D sequence of integers, got shape {lengths.shape} "
            f"dtype {lengths.dtype}"
        )
    if lengths.size and (lengths.min() < 0 or lengths.max() > S):
        raise ValueError(f"lengths must lie in [0, S={S}], got {lengths.tolist()}")
    j = np.arange(S)[None, None, :]  # (1, 1, S)
    return j < lengths[:, None, None]  # (B, 1, S)


def combine(*masks) -> np.ndarray | None:
    """AND of the given masks (None entries are skipped), broadcast together; None if none given."""
    result = None
    for m in masks:
        if m is None:
            continue
        m = np.asarray(m)
        if m.dtype != np.bool_:
            raise TypeError(f"masks must be boolean (True = may attend), got dtype {m.dtype}")
        result = m if result is None else np.logical_and(result, m)
    return result


def causal_align(causal_flag) -> str | None:
    """Translate the engine's ``causal=`` argument into an alignment name (or None)."""
    if causal_flag is False or causal_flag is None:
        return None
    if causal_flag is True:
        return "bottom-right"
    if isinstance(causal_flag, str) and causal_flag in ALIGNMENTS:
        return causal_flag
    raise ValueError(
        f"causal must be True, False, 'bottom-right' or 'top-left', got {causal_flag!r}"
    )


def _check_size(name: str, n) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {n!r}")
