"""Subject–verb agreement sentences: "I work , you work , he often works , she ___".

Each sentence repeats one verb over several clauses; a clause is a pronoun, 0–3 filler words
(so the subject's distance from the verb varies and position alone cannot decide), then the verb,
whose form is stem+s exactly when the pronoun is 3rd-person singular.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PRONOUNS = ("I", "you", "we", "they", "he", "she", "it")
THIRD_SINGULAR = frozenset({"he", "she", "it"})
VERBS = ("work", "run", "play", "eat", "read", "walk", "sing", "swim", "cook", "write")
FILLERS = ("often", "never", "always", "really", "still", "also", "sometimes", "usually",
           "rarely", "just")
SPECIAL = ("<pad>", "<bos>", ",")
VOCAB = (*SPECIAL, *PRONOUNS, *FILLERS, *VERBS, *(v + "s" for v in VERBS))
MAX_LEN = 24  # <bos> + 4 clauses of at most 5 words + 3 commas


def held_out(pronoun: str, verb: str) -> bool:
    """Pronoun–verb pairs never seen in training, used to test generalisation."""
    return (PRONOUNS.index(pronoun) * 3 + VERBS.index(verb)) % 7 == 0


@dataclass(frozen=True)
class Batch:
    ids: np.ndarray  # (B, T) token ids, <pad> after the end
    verb_pos: np.ndarray  # (n, 2) [sentence, position] of verbs after the first clause
    subject_pos: np.ndarray  # (n,) position of the subject of each such verb
    third: np.ndarray  # (n,) whether that subject is 3rd-person singular


def encode(words: list[str]) -> list[int]:
    unknown = [w for w in words if w not in VOCAB]
    if unknown:
        raise ValueError(f"unknown words {unknown}; the Mini-GPT knows {list(VOCAB[1:])}")
    return [VOCAB.index(w) for w in words]


def sentence(rng: np.random.Generator, *, test: bool) -> tuple[list[str], list[tuple[int, int]]]:
    """One sentence, and (subject position, verb position) of each clause."""
    while True:
        verb = VERBS[rng.integers(len(VERBS))]
        subjects = [PRONOUNS[i] for i in rng.integers(len(PRONOUNS), size=rng.integers(2, 5))]
        pairs_held = [held_out(p, verb) for p in subjects[1:]]
        if any(pairs_held) == test:
            break
    words, slots = ["<bos>"], []
    for n, subject in enumerate(subjects):
        if n:
            words.append(",")
        s = len(words)
        words.append(subject)
        words += [FILLERS[i] for i in rng.choice(len(FILLERS), rng.integers(0, 4), replace=False)]
        slots.append((s, len(words)))
        words.append(verb + "s" if subject in THIRD_SINGULAR else verb)
    return words, slots


def batch(rng: np.random.Generator, size: int, *, test: bool = False) -> Batch:
    """``size`` sentences: training ones avoid the held-out pairs, test ones contain them."""
    ids = np.zeros((size, MAX_LEN), dtype=np.int64)
    verbs, subjects, third = [], [], []
    for b in range(size):
        words, slots = sentence(rng, test=test)
        ids[b, : len(words)] = encode(words)
        for s, v in slots[1:]:  # the first verb cannot be known in advance
            verbs.append((b, v))
            subjects.append(s)
            third.append(VOCAB[ids[b, s]] in THIRD_SINGULAR)
    return Batch(ids, np.array(verbs), np.array(subjects), np.array(third))
