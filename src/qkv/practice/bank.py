"""The bank of exercise kinds, by topic, and how a seed picks and builds them.

    build(kind, seed)         one exercise; the same (kind, seed) always gives the same one
    draw(topic, n, seed)      n exercises of a topic ("all": every topic), kinds in turn
"""

from __future__ import annotations

import zlib

import numpy as np

from qkv.practice import computing, concepts, masking, sizes
from qkv.practice.exercise import Exercise

KINDS = {**sizes.KINDS, **computing.SCORES, **computing.SOFTMAX, **masking.KINDS,
         **concepts.KINDS}
TOPICS = ("sizes", "scores", "softmax", "masks", "concepts")
MAX_SEED = 2 ** 32 - 1


def kinds(topic: str = "all") -> list[str]:
    """The kind names of a topic, in the bank's order."""
    if topic != "all" and topic not in TOPICS:
        raise ValueError(f"topic must be one of {('all', *TOPICS)}, got {topic!r}")
    return [k for k in KINDS if topic == "all" or k.split("/")[0] == topic]


def build(kind: str, seed: int) -> Exercise:
    """The exercise of this kind for this seed, its numbers drawn from default_rng(seed)."""
    if kind not in KINDS:
        raise ValueError(f"unknown exercise kind {kind!r}; choose one of {list(KINDS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}")
    # the kind's name joins the seed (crc32: stable across runs and when kinds are added)
    rng = np.random.default_rng([int(seed), zlib.crc32(kind.encode())])
    return Exercise(kind=kind, seed=int(seed), **KINDS[kind](rng))


def pick(topic: str, seed: int) -> Exercise:
    """One exercise of a topic: the seed picks the kind, then builds it."""
    names = kinds(topic)
    rng = np.random.default_rng(seed)
    return build(names[int(rng.integers(len(names)))], seed)


def draw(topic: str = "all", n: int = 5, seed: int | None = None) -> list[Exercise]:
    """n exercises: the topic's kinds shuffled, taken in turn, each with its own seed."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    names = kinds(topic)
    rng = np.random.default_rng(seed)
    picked: list[str] = []
    while len(picked) < n:
        picked += [names[j] for j in rng.permutation(len(names))]
    seeds = rng.integers(0, MAX_SEED, size=n, endpoint=True)
    return [build(k, int(s)) for k, s in zip(picked[:n], seeds)]
