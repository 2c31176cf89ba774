"""How qkv names a token's row and finds the row a person names: one labelling (``labels``:
edge spaces shown as ␣, @position where a token repeats) and one picker (``pick``), for the
terminal, the page, the notebook and the export alike."""

from __future__ import annotations

from collections import Counter

import numpy as np


def visible(token: str) -> str:
    """A token with its edge spaces and line breaks made visible: " cat" -> "␣cat"."""
    core = token.strip(" ")
    lead, trail = len(token) - len(token.lstrip(" ")), len(token) - len(token.rstrip(" "))
    if not core:
        return "␣" * len(token)
    return ("␣" * lead + core + "␣" * trail).replace("\n", "\\n").replace("\t", "\\t")


def labels(tokens, n: int) -> list[str]:
    """Row names for n positions: the token (edge spaces shown as ␣), with @position added
    where a token repeats."""
    toks = (
        [visible(t) for t in tokens] if tokens and len(tokens) == n else [str(j) for j in range(n)]
    )
    counts = Counter(toks)  # one pass: a long text has thousands of tokens
    return [t if counts[t] == 1 else f"{t}@{j}" for j, t in enumerate(toks)]


def select_label(tokens, text: str) -> int | None:
    """The position a row label names: "the@4" (token@position, as ``labels`` writes a repeated
    token; the token may be written with or without its ␣) or a label exactly ("␣cat").
    None when ``text`` is neither (the caller then looks for the token's text); a ValueError
    when the position holds another token."""
    tokens = list(tokens)
    names = labels(tokens, len(tokens))
    if text in names:
        return names.index(text)
    token, at, pos = text.rpartition("@")
    if not (at and token and pos.isdigit()):
        return None
    j = int(pos)
    if j >= len(tokens):
        raise ValueError(
            f"{text!r}: position {j} is past the last token; positions run 0-{len(tokens) - 1}"
        )
    here = tokens[j]
    if token in (here, visible(here)) or token.strip().lower() == here.strip().lower():
        return j
    raise ValueError(
        f"{text!r}: position {j} holds {visible(here)!r}, not {token!r}; choose one of {names}"
    )


def pick(tokens, token) -> int:
    """The row ``token`` names among ``tokens`` (a list of labels or raw tokens): an index in
    [0, n), negative counting from the end (-1 is the last), a label ("␣cat", "the@4"), or the
    token's text without its edge spaces, in any case. A ValueError names what is accepted."""
    tokens = list(tokens)
    n = len(tokens)
    if isinstance(token, (int, np.integer)) and not isinstance(token, bool):
        if not -n <= token < n:
            raise ValueError(
                f"select must be a token index in [0, {n}) (or -{n}..-1 from the end), got {token}"
            )
        return int(token) % n
    if isinstance(token, str):
        at = select_label(tokens, token)
        if at is not None:
            return at
        names = labels(tokens, n)
        plain = [t.replace("␣", " ").strip().lower() for t in names]
        wanted = token.replace("␣", " ").strip().lower()
        if wanted in plain:
            return plain.index(wanted)
    raise ValueError(
        f"select must be a token index 0-{n - 1} or one of {labels(tokens, n)}, got {token!r}"
    )
