"""How the walkthrough writes numbers: fixed decimals, vectors, dot products term by term, and
an honest "≈" or note wherever rounded terms shown on the page do not add up to the total shown.
"""

from __future__ import annotations

import math

import numpy as np

ROUNDED = (
    "≈: the terms are shown rounded, so they may not add up to the total exactly; the "
    "total adds their unrounded values"
)


def fmt(x: float, digits: int = 2) -> str:
    """A number as the walkthrough prints it: fixed decimals, -inf for masked scores."""
    x = float(x)
    if x == -math.inf:
        return "-inf"
    if x == math.inf:
        return "inf"
    if math.isnan(x):
        return "nan"
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.00"


def vec(a, digits: int = 2, limit: int = 8) -> str:
    """A vector as [a, b, c], abbreviated with … past ``limit`` entries."""
    a = np.asarray(a).ravel()
    items = [fmt(e, digits) for e in a[:limit]]
    if a.size > limit:
        items.append(f"… ({a.size} in all)")
    return "[" + ", ".join(items) + "]"


def factor(b: float, digits: int) -> str:
    """A factor after ×: negative numbers in parentheses, "(-1.00)"."""
    text = fmt(b, digits)
    return f"({text})" if text.startswith("-") else text


def equals(shown: float | None, total: float, digits: int = 2) -> str:
    """ " = total", or " ≈ total" when ``shown`` (what the rounded terms on the page add up to)
    rounds to something else; None: the terms are abbreviated, so there is nothing to check."""
    text = fmt(total, digits)
    return f" ≈ {text}" if shown is not None and fmt(shown, digits) != text else f" = {text}"


def dot_terms(q, k, digits: int = 2, limit: int = 8) -> str:
    """q·k written out term by term: 1.00×0.50 + 0.20×(-1.00) + … = 0.71 (≈ where the rounded
    factors shown multiply and add up to something else)."""
    pairs = list(zip(np.ravel(q), np.ravel(k), strict=False))
    shown = [(float(fmt(a, digits)), float(fmt(b, digits))) for a, b in pairs[:limit]]
    terms = [f"{fmt(a, digits)}×{factor(b, digits)}" for a, b in pairs[:limit]]
    if len(pairs) > limit:
        terms.append("…")
    exact = sum(a * b for a, b in shown) if len(pairs) <= limit else None
    return " + ".join(terms) + equals(exact, np.dot(np.ravel(q), np.ravel(k)), digits)


def rounded_sum(a, what: str, digits: int = 3) -> str:
    """ "" when the column of ``a`` shown with ``digits`` decimals adds up to the sum shown, else a
    note saying that the values shown are rounded and what they add up to."""
    shown = sum(float(fmt(e, digits)) for e in np.ravel(a))
    if fmt(shown, digits) == fmt(np.sum(a), digits):
        return ""
    return (
        f" (the {what} shown are rounded to {digits} decimals: they add up to {fmt(shown, digits)})"
    )
