"""One exercise, how an answer to it is read, and how it is judged.

An exercise is identified by its kind (``"sizes/d_head"``) and its seed: the same pair always
builds the same exercise, so a server can re-create it to check an answer it never stored.

Answer types and what a learner may type:

    number   12   0.27   1/8   1,048,576   2.36M   (k, M, G multiply by 10³, 10⁶, 10⁹)
    choice   b            (one letter)
    keys     3 4   or  3,4   or  none     (a set of key positions)
    vector   0.5 1.2  or  [0.5, 1.2]
    order    c a b e d f  or  cabedf      (every letter once)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ANSWER_TYPES = ("number", "choice", "keys", "vector", "order")
LETTERS = "abcdefghij"
MAX_NUMBER = 1e15  # larger answers are typos; it also keeps every gap finite


def choice(prompt: str, answer: int, choices, hint: str, solution, data: dict) -> dict:
    """The fields of a choice exercise whose right answer is ``choices[answer]``."""
    return dict(
        prompt=prompt,
        answer_type="choice",
        answer=answer,
        choices=tuple(choices),
        hint=hint,
        solution=tuple(solution),
        data=data,
    )


class AnswerError(ValueError):
    """Input that is not an answer of the expected form; the message says what was expected."""


@dataclass(frozen=True)
class Exercise:
    """A question with its engine-computed answer, tolerance, hint and worked solution."""

    kind: str  # "topic/name"
    seed: int
    prompt: str
    answer_type: str  # one of ANSWER_TYPES
    # float | int (choice index) | tuple[int, ...] (keys, order) | tuple[float, ...] (vector):
    # which one follows answer_type, a tag the type checker cannot narrow on
    answer: Any
    hint: str
    solution: tuple[str, ...]  # shown after answering, right or wrong
    choices: tuple[str, ...] = ()  # choice and order exercises
    tol: float = 0.0  # absolute tolerance for number and vector answers
    rel: float = 0.0  # relative tolerance for number answers (large counts)
    size: int = 0  # keys: the number S of keys, positions 0..S-1
    # the numbers in the prompt (never the answer)
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.answer_type not in ANSWER_TYPES:
            raise ValueError(f"answer_type must be one of {ANSWER_TYPES}, got {self.answer_type!r}")

    @property
    def topic(self) -> str:
        return self.kind.split("/", 1)[0]

    def answer_format(self) -> str:
        """What a learner should type, in one line."""
        n = len(self.choices)
        if self.answer_type == "number":
            t = self.tolerance_text()
            return "a number" + (f" ({t})" if t else "")
        if self.answer_type == "choice":
            return f"one letter, a–{LETTERS[n - 1]}"
        if self.answer_type == "keys":
            return f"key positions 0–{self.size - 1} separated by spaces, or 'none'"
        if self.answer_type == "vector":
            return f"{len(self.answer)} numbers separated by spaces" + (
                f" (within ±{self.tol:g} each)" if self.tol else ""
            )
        return f"the letters a–{LETTERS[n - 1]} in order, each once (e.g. '{LETTERS[:n]}')"

    def tolerance_text(self) -> str:
        if self.rel:
            return f"within {100 * self.rel:g}%"
        return f"within ±{self.tol:g}" if self.tol else "exact"

    def expected_text(self) -> str:
        """The right answer as a person reads it."""
        a = self.answer
        if self.answer_type == "number":
            return _number_text(a)
        if self.answer_type == "choice":
            return f"{LETTERS[a]}) {self.choices[a]}"
        if self.answer_type == "keys":
            return " ".join(str(j) for j in a) if a else "none"
        if self.answer_type == "vector":
            return "[" + ", ".join(f"{x:.2f}" for x in a) + "]"
        return (
            " ".join(LETTERS[j] for j in a) + "  (" + " → ".join(self.choices[j] for j in a) + ")"
        )

    def public(self) -> dict[str, Any]:
        """Everything a client may see before answering (no answer, no solution)."""
        return {
            "kind": self.kind,
            "topic": self.topic,
            "seed": self.seed,
            "prompt": self.prompt,
            "answer_type": self.answer_type,
            "choices": list(self.choices),
            "answer_format": self.answer_format(),
            "hint": self.hint,
        }


@dataclass(frozen=True)
class Verdict:
    correct: bool
    given: str  # the parsed answer, as read back
    expected: str
    gap: float | None = None  # |given − answer| for numbers (largest entry for vectors)


def check(ex: Exercise, text: str) -> Verdict:
    """Judge ``text`` as an answer to ``ex``; AnswerError when it is not of the expected form."""
    text = (text or "").strip()
    if not text:
        raise AnswerError(f"expected {ex.answer_format()}, got nothing")
    t = ex.answer_type
    if t == "number":
        x = parse_number(text)
        gap = abs(x - float(ex.answer))
        ok = gap <= ex.tol + ex.rel * abs(float(ex.answer)) + 1e-12
        return Verdict(ok, _number_text(x), ex.expected_text(), gap)
    if t == "choice":
        j = _parse_letters(text, len(ex.choices), single=True)[0]
        return Verdict(j == ex.answer, LETTERS[j], ex.expected_text())
    if t == "keys":
        keys = _parse_keys(text, ex.size)
        return Verdict(
            keys == tuple(ex.answer), " ".join(map(str, keys)) or "none", ex.expected_text()
        )
    if t == "vector":
        xs = _parse_vector(text, len(ex.answer))
        gap = float(np.max(np.abs(np.subtract(xs, ex.answer))))
        return Verdict(
            gap <= ex.tol + 1e-12,
            "[" + ", ".join(f"{x:g}" for x in xs) + "]",
            ex.expected_text(),
            gap,
        )
    order = _parse_letters(text, len(ex.choices), single=False)
    return Verdict(
        order == tuple(ex.answer), " ".join(LETTERS[j] for j in order), ex.expected_text()
    )


_SUFFIX = {"k": 1e3, "m": 1e6, "g": 1e9}
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?")


def parse_number(text: str) -> float:
    """A finite number: 0.27, -3, 1/8, 1,048,576, 2.36M, 1e6."""
    s = text.strip().lower().replace("_", "").replace("−", "-").replace(" ", "")
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    factor = 1.0
    if s[-1:] in _SUFFIX:
        s, factor = s[:-1], _SUFFIX[s[-1]]
    parts = s.split("/")
    if len(parts) > 2 or not all(_NUMBER.fullmatch(p) for p in parts):
        raise AnswerError(f"expected a number such as 0.27, 1/8, 1,024 or 2.36M, got {text!r}")
    value = float(parts[0]) * factor
    if len(parts) == 2:
        if float(parts[1]) == 0:
            raise AnswerError(f"expected a number, got a division by zero in {text!r}")
        value /= float(parts[1])
    if not (math.isfinite(value) and abs(value) <= MAX_NUMBER):
        raise AnswerError(
            f"expected a finite number of size at most {MAX_NUMBER:.0e}, got {text!r}"
        )
    return value


def _parse_letters(text: str, n: int, *, single: bool) -> tuple[int, ...]:
    s = re.sub(r"[\s,()\[\].>-]+", "", text.lower())
    allowed = LETTERS[:n]
    if single:
        if len(s) != 1 or s not in allowed:
            raise AnswerError(f"expected one letter a–{allowed[-1]}, got {text!r}")
        return (allowed.index(s),)
    if sorted(s) != sorted(allowed):
        raise AnswerError(
            f"expected each of the letters {', '.join(allowed)} exactly once, got {text!r}"
        )
    return tuple(allowed.index(c) for c in s)


def _parse_keys(text: str, size: int) -> tuple[int, ...]:
    s = text.strip().lower().strip("{}[]() ")
    if s in ("none", "-", "no", "0 keys", ""):
        return ()
    items = [p for p in re.split(r"[\s,;]+", s) if p]
    if not items or not all(re.fullmatch(r"\d+", p) for p in items):  # "," holds no position
        raise AnswerError(
            f"expected key positions 0–{size - 1} separated by spaces, or 'none', got {text!r}"
        )
    keys = sorted({int(p) for p in items})
    if keys[-1] >= size:
        raise AnswerError(f"key positions run from 0 to {size - 1}, got {keys[-1]}")
    return tuple(keys)


def _parse_vector(text: str, n: int) -> tuple[float, ...]:
    s = text.strip().strip("[]() ")
    items = [p for p in re.split(r"[\s,;]+", s) if p]
    if len(items) != n:
        raise AnswerError(f"expected {n} numbers separated by spaces, got {len(items)}: {text!r}")
    return tuple(parse_number(p) for p in items)


def _number_text(x: float) -> str:
    x = float(x)
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:.4g}" if abs(x) < 1e4 else f"{x:,.1f}"
