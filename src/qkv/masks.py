"""Boolean attention masks. Polarity everywhere in qkv: True = may attend.

Masks are built from position indices (``arange`` comparisons), combined with AND,
and applied once by the engine as ``where(mask, s, -inf)``.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Rule:
    """A mask kept as a rule, not as an (L, S) array: the user's boolean ``mask`` AND
    ``causal`` (an alignment name, or None) AND a sliding ``window`` (the query at position p
    sees keys j with p − j < window; None for none). Query i is at position i + (S − L)
    ("bottom-right", and without ``causal``) or i ("top-left").

    ``mask`` has one axis per leading axis of the scores (batch …, heads, L, S), each of its
    own size or 1 (key padding is (B, 1, 1, S)), or is None. ``block`` gives the rows one
    computation needs; ``dense`` the whole mask, as ``checks.effective_mask`` builds it."""

    L: int
    S: int
    mask: np.ndarray | None = None
    causal: str | None = None
    window: int | None = None

    @property
    def offset(self) -> int:
        """Position of query 0 among the keys."""
        return 0 if self.causal == "top-left" else self.S - self.L

    def positions(self, r0: int, r1: int) -> np.ndarray | None:
        """Rows r0..r1−1 of the causal and window parts, (r1 − r0, S); None when neither is set."""
        if self.causal is None and self.window is None:
            return None
        p = np.arange(r0, r1)[:, None] + self.offset  # (rows, 1): each query's position
        j = np.arange(self.S)[None, :]  # (1, S)
        allowed = j <= p if self.causal is not None else np.ones((r1 - r0, self.S), bool)
        if self.window is not None:
            allowed = allowed & (p - j < self.window)
        return allowed  # (rows, S)

    def block(self, index: tuple, r0: int, r1: int) -> np.ndarray | None:
        """Rows r0..r1−1 of the mask at leading index ``index`` (batch …, head): (r1 − r0, S)
        booleans, or None when nothing is masked."""
        rule = self.positions(r0, r1)
        if self.mask is None:
            return rule
        user = np.broadcast_to(pick_rows(self.mask, index, r0, r1), (r1 - r0, self.S))
        return user if rule is None else user & rule

    def dense(self):
        """The whole mask: the user's mask AND the rule, broadcast together; None when nothing
        is masked."""
        return combine(self.mask, self.positions(0, self.L))

    def take(self, b: int, keep) -> Rule:
        """The rule of sequence ``b`` (leading axis 0 of the mask) with only the positions
        ``keep`` (increasing) on both the query and the key axis (self-attention, L = S)."""
        keep = np.asarray(keep)
        n = len(keep)
        if self.L != self.S:
            raise ValueError(
                f"take keeps positions of self-attention (L = S), got {self.L}, {self.S}"
            )
        gaps = n > 0 and keep[-1] - keep[0] + 1 != n
        if self.window is not None and gaps:  # a window counts the positions dropped: keep it whole
            rows = self.positions(0, self.L)
            assert rows is not None  # a window is set
            whole = rows[None]  # (1, L, S)
            if self.mask is not None:
                whole = self.mask[b if self.mask.shape[0] > 1 else 0] & whole  # (heads or 1, L, S)
            return Rule(n, n, mask=np.ascontiguousarray(whole[:, keep][:, :, keep]))
        mask = None
        if self.mask is not None:
            m = self.mask[b if self.mask.shape[0] > 1 else 0]  # (heads or 1, L or 1, S or 1)
            m = m[:, keep] if m.shape[1] > 1 else m
            m = m[:, :, keep] if m.shape[2] > 1 else m
            mask = None if m.all() else np.ascontiguousarray(m)
        return Rule(n, n, mask=mask, causal=self.causal, window=self.window)


def pick_rows(a: np.ndarray, index: tuple, r0: int, r1: int) -> np.ndarray:
    """Rows r0..r1−1 of ``a`` (one axis per entry of ``index``, then L or 1, S or 1) at
    ``index``, axes of size 1 broadcasting: (r1 − r0 or 1, S or 1)."""
    at = tuple(0 if n == 1 else i for n, i in zip(a.shape[:-2], index, strict=True))
    a = a[at]
    return a if a.shape[0] == 1 else a[r0:r1]


def infer(dense, L: int, S: int) -> Rule:
    """The ``Rule`` a boolean mask (..., L, S) (True = may attend) follows: the keys it hides
    from every query (padding) as a (..., 1, S) mask, AND a causal alignment and a sliding
    window when the mask is exactly that; else the mask itself, kept whole."""
    dense = np.asarray(dense)
    if dense.all():
        return Rule(L, S)
    keys = dense.any(axis=-2, keepdims=True)  # (..., 1, S): the keys some query sees
    keys_mask = None if keys.all() else keys
    for causal in ("bottom-right", "top-left", None):
        for window in _windows(dense, L, S, causal):
            rule = Rule(L, S, mask=keys_mask, causal=causal, window=window)
            if _follows(dense, rule):
                return rule
    return Rule(L, S, mask=dense)


def _windows(dense, L: int, S: int, causal) -> list:
    """Windows to try: none, and the smallest that shows every key the mask shows."""
    if causal is None or not dense.any():
        return [None]
    offset = 0 if causal == "top-left" else S - L
    seen = dense.any(axis=-1)  # (..., L)
    first = dense.argmax(axis=-1)  # (..., L): the first key each query sees
    reach = (np.arange(L) + offset - first)[seen]  # how far back each query sees
    window = int(reach.max()) + 1
    return [None] if window >= L + offset else [None, window]


def _follows(dense, rule: Rule, rows: int = 1024) -> bool:
    """Whether ``dense`` equals ``rule``'s mask, compared ``rows`` rows at a time."""
    for r0 in range(0, rule.L, rows):
        r1 = min(rule.L, r0 + rows)
        part = combine(rule.mask, rule.positions(r0, r1))
        got = dense[..., r0:r1, :]
        if not np.array_equal(np.broadcast_to(True if part is None else part, got.shape), got):
            return False
    return True
