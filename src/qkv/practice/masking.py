"""Mask exercises: which keys a causal mask hides for a query (L ≠ S, either alignment), how many
query rows see no key at all, and what the engine gives such a row.

Answers come from ``qkv.masks.causal`` and ``qkv.attention`` (polarity: True = may attend).
"""

from __future__ import annotations

import numpy as np

from qkv import attention, masks
from qkv.explain.walkthrough import vec
from qkv.practice.exercise import choice


def _row_picture(row) -> str:
    return " ".join("■" if seen else "·" for seen in row)


def _rule(L: int, S: int, align: str) -> str:
    if align == "bottom-right":
        shift = f"i + {S - L}" if S >= L else f"i − {L - S}"
        where = f" (the {L} queries are the last {L} of the {S} positions)" if S >= L else ""
        return f"bottom-right: query i sees keys j ≤ i + (S − L) = {shift}{where}"
    return "top-left: query i sees keys j ≤ i (queries and keys both start at position 0)"


def hidden_keys(rng) -> dict:
    S = int(rng.integers(3, 8))
    L = int(rng.integers(1, S + 1))
    align = str(rng.choice(masks.ALIGNMENTS))
    i = int(rng.integers(L))
    mask = masks.causal(L, S, align)  # (L, S), True = may attend
    hidden = tuple(int(j) for j in np.flatnonzero(~mask[i]))
    lines = [
        _rule(L, S, align),
        f"query {i}: visible keys {[int(j) for j in np.flatnonzero(mask[i])]}, "
        f"hidden {list(hidden) or 'none'}",
        "the whole mask (■ = may attend, · = hidden; one row per query):",
    ]
    lines += [f"  query {r}: {_row_picture(mask[r])}" for r in range(L)]
    return dict(
        prompt=f"Causal attention with L = {L} queries over S = {S} keys (positions 0–{S - 1}), "
        f"{align} alignment. Which keys does query {i} NOT see? (counting from 0)",
        answer_type="keys",
        answer=hidden,
        size=S,
        hint=_rule(L, S, align).split(": ", 1)[1] + "; the rest are hidden.",
        solution=tuple(lines),
        data={"L": L, "S": S, "align": align, "i": i},
    )


def empty_rows(rng) -> dict:
    S = int(rng.integers(2, 6))
    L = S + int(rng.integers(1, 4))
    mask = masks.causal(L, S, "bottom-right")  # (L, S)
    empty = int((~mask.any(axis=1)).sum())
    lines = [
        _rule(L, S, "bottom-right"),
        f"i + ({S} − {L}) < 0 for i < {L - S}: those queries see no key",
    ]
    lines += [f"  query {r}: {_row_picture(mask[r])}" for r in range(L)]
    lines.append(
        "qkv gives such a row weights 0 and output 0 (softmax over nothing is "
        "undefined; 0 is what 'attends to nothing' means)"
    )
    return dict(
        prompt=f"A causal mask with bottom-right alignment has L = {L} queries but only S = {S} "
        f"keys. How many query rows see no key at all?",
        answer_type="number",
        answer=empty,
        hint="Bottom-right: query i sees keys j ≤ i + (S − L). When is i + S − L negative?",
        solution=tuple(lines),
        data={"L": L, "S": S},
    )


EMPTY_CHOICES = (
    "its weights are all 0 and its output z is 0",
    "it spreads its weight evenly, 1/S per key",
    "its weights and output are NaN",
    "the call raises an error",
)


def empty_row_value(rng) -> dict:
    S = int(rng.integers(2, 5))
    L, d = S + 1, 2
    q = rng.standard_normal((L, d))
    k, v = rng.standard_normal((S, d)), rng.standard_normal((S, d))
    try:
        z, trace = attention(q, k, v, causal=True, return_trace=True)
    except ValueError:
        answer, lines = 3, ["qkv raised an error"]
    else:
        w0 = trace.steps["weights"][0]
        if np.isnan(w0).any() or np.isnan(z[0]).any():
            answer = 2
        elif not w0.any() and not z[0].any():
            answer = 0
        else:
            answer = 1
        lines = [
            f"L = {L} queries, S = {S} keys, bottom-right: query 0 sees keys j ≤ 0 + "
            f"({S} − {L}) = −1, i.e. none",
            f"qkv.attention(q, k, v, causal=True): weights[0] = {vec(w0, 3)}, "
            f"z[0] = {vec(z[0], 3)}",
            f"query 1 sees key 0 only: weights[1] = {vec(trace.steps['weights'][1], 3)}",
            "the masked scores are −∞; with no finite score left, qkv decides from the mask "
            "and returns 0 rather than 0/0 = NaN",
        ]
    return choice(
        f"In qkv, query 0 of a causal (bottom-right) attention with L = {L} queries and "
        f"S = {S} keys can see no key. What does that row get?",
        answer,
        EMPTY_CHOICES,
        "softmax of a row of −∞ is 0/0; qkv chooses a defined value from the mask.",
        tuple(lines),
        {"L": L, "S": S},
    )


KINDS = {
    "masks/hidden": hidden_keys,
    "masks/empty_rows": empty_rows,
    "masks/empty_row_value": empty_row_value,
}
