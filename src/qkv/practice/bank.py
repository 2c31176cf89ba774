"""The bank of exercise kinds, by topic, and how a seed picks and builds them.

build(kind, seed)         one exercise; the same (kind, seed) always gives the same one
draw(topic, n, seed)      n different exercises of a topic ("all": every topic), kinds in turn
"""

from __future__ import annotations

import zlib

import numpy as np

from qkv import checks
from qkv.practice import computing, concepts, masking, sizes
from qkv.practice.exercise import Exercise

KINDS = {**sizes.KINDS, **computing.SCORES, **computing.SOFTMAX, **masking.KINDS, **concepts.KINDS}
TOPICS = ("sizes", "scores", "softmax", "masks", "concepts")
MAX_SEED = 2**32 - 1


def kinds(topic: str = "all") -> list[str]:
    """The kind names of a topic, in the bank's order."""
    if topic != "all" and topic not in TOPICS:
        raise ValueError(f"topic must be one of {('all', *TOPICS)}, got {topic!r}")
    return [k for k in KINDS if topic == "all" or k.split("/")[0] == topic]


def build(kind: str, seed: int) -> Exercise:
    """The exercise of this kind for this seed, its numbers drawn from default_rng(seed)."""
    if kind not in KINDS:
        raise ValueError(f"unknown exercise kind {kind!r}; choose one of {list(KINDS)}")
    if (
        isinstance(seed, bool)
        or not isinstance(seed, (int, np.integer))
        or not 0 <= seed <= MAX_SEED
    ):
        raise ValueError(f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}")
    # the kind's name joins the seed (crc32: stable across runs and when kinds are added)
    rng = np.random.default_rng([int(seed), zlib.crc32(kind.encode())])
    return Exercise(kind=kind, seed=int(seed), **KINDS[kind](rng))


def pick(topic: str, seed: int) -> Exercise:
    """One exercise of a topic: the seed picks the kind, then builds it."""
    names = kinds(topic)
    rng = np.random.default_rng(seed)
    return build(names[int(rng.integers(len(names)))], seed)


def identity(ex: Exercise) -> set[tuple]:
    """What makes two exercises the same for a learner: the kind with the same question text,
    or the kind with the same numbers (``data``) under other words."""
    keys = {(ex.kind, "prompt", ex.prompt)}
    if ex.data:
        keys.add((ex.kind, "data", repr(sorted(ex.data.items()))))
    return keys


TRIES = 64  # fresh seeds tried for a kind before taking it as used up


def draw(
    topic: str = "all", n: int = 5, seed: int | None = None, *, kind: str | None = None
) -> list[Exercise]:
    """n different exercises: the topic's kinds shuffled, taken in turn, each with its own seed
    (or n of one ``kind``). A seed that repeats an exercise already drawn (same kind and question
    or numbers) is replaced by a fresh one; a kind with no new exercise left gives its turn to
    the next kind; a ValueError when the topic has fewer than n different exercises."""
    checks.positive_int("n", n)
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown exercise kind {kind!r}; choose one of {list(KINDS)}")
    names = [kind] if kind else kinds(topic)
    rng = np.random.default_rng(seed)
    picked: list[str] = []
    while len(picked) < n:
        picked += [names[j] for j in rng.permutation(len(names))] if not kind else [kind] * n
    seeds = rng.integers(0, MAX_SEED, size=n, endpoint=True)
    out: list[Exercise] = []
    seen: set[tuple] = set()
    used_up: set[str] = set()
    for k, s in zip(picked[:n], seeds, strict=False):
        order = [k] + [m for m in names if m != k]  # the kind's turn, then the others by rank
        ex = None
        for m in (m for m in order if m not in used_up):
            ex = _fresh(m, int(s) if m == k else None, rng, seen)
            if ex is not None:
                break
            used_up.add(m)
        if ex is None:
            what = f"kind {kind!r}" if kind else f"topic {topic!r}"
            raise ValueError(
                f"{what} has {len(out)} different exercises; asked for {n}, so "
                f"some would repeat (ask for {len(out)} or fewer)"
            )
        out.append(ex)
        seen |= identity(ex)
    return out


def _fresh(kind: str, seed: int | None, rng, seen: set) -> Exercise | None:
    """An exercise of ``kind`` not in ``seen``: from ``seed`` first, then from fresh seeds."""
    candidates = ([seed] if seed is not None else []) + [None] * TRIES
    for s in candidates:
        s = int(rng.integers(0, MAX_SEED, endpoint=True)) if s is None else s
        ex = build(kind, s)
        if not identity(ex) & seen:
            return ex
    return None
