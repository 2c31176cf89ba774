"""Subject–verb agreement across attractors (after Linzen, Dupoux & Goldberg 2016).

A small generated grammar: "<bos> the old key to the cabinets that the man holds is ."
The subject is the first noun; 0–3 modifiers follow it, each a prepositional phrase
("near the cars") or an object relative clause ("that the man holds", whose verb agrees with
its own noun); each modifier brings one intervening noun (an *attractor*) of either number; then
the main verb, whose number follows the subject, and ".".

Held-out split: a (subject noun, main verb) pair is held out by a fixed rule (``HELD_OUT``). No
training sentence holds a held-out pair as the subject and verb of any clause; every test
sentence's main clause is a held-out pair. ``relations`` reads the pairs back from the words
alone, so the split can be checked on the dumped text.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

NOUNS = (
    ("key", "keys"),
    ("cabinet", "cabinets"),
    ("dog", "dogs"),
    ("car", "cars"),
    ("man", "men"),
    ("woman", "women"),
    ("child", "children"),
    ("box", "boxes"),
    ("bird", "birds"),
    ("teacher", "teachers"),
    ("table", "tables"),
    ("book", "books"),
)
VERBS = (
    ("is", "are"),
    ("was", "were"),
    ("falls", "fall"),
    ("stays", "stay"),
    ("moves", "move"),
    ("waits", "wait"),
    ("shines", "shine"),
    ("sleeps", "sleep"),
)
REL_VERBS = (("holds", "hold"), ("sees", "see"), ("likes", "like"), ("finds", "find"))
PREPOSITIONS = ("near", "to", "on", "behind", "with", "under", "by", "of")
ADJECTIVES = ("old", "red", "small", "big", "new")
SPECIAL = ("<pad>", "<bos>", ".", "the", "that")
VOCAB = (
    *SPECIAL,
    *PREPOSITIONS,
    *ADJECTIVES,
    *(w for pair in NOUNS for w in pair),
    *(w for pair in VERBS for w in pair),
    *(w for pair in REL_VERBS for w in pair),
)
INDEX = {w: i for i, w in enumerate(VOCAB)}
MAX_LEN = 20  # <bos> the adj adj N + 3 × (that the N holds) + verb .  = 19, plus one spare
MAX_ATTRACTORS = 3

NOUN_OF = {w: (lemma[0], plural) for lemma in NOUNS for plural, w in enumerate(lemma)}
VERB_OF = {w: (lemma[0], plural) for lemma in VERBS for plural, w in enumerate(lemma)}
REL_OF = {w: (lemma[0], plural) for lemma in REL_VERBS for plural, w in enumerate(lemma)}

# (subject noun, main verb) pairs never trained on: 16 of the 12 × 8, each noun in one or two
HELD_OUT = frozenset(
    (n[0], v[0]) for i, n in enumerate(NOUNS) for j, v in enumerate(VERBS) if (i + 5 * j) % 6 == 0
)


@dataclass(frozen=True)
class Sentence:
    words: tuple[str, ...]
    subject: int  # position of the subject noun
    verb: int  # position of the main verb
    attractors: tuple[int, ...]  # positions of the nouns between subject and verb
    plural: bool  # the subject's (and so the verb's) number

    def opposite(self) -> int:
        """How many attractors have the number opposite to the subject's."""
        return sum(NOUN_OF[self.words[a]][1] != self.plural for a in self.attractors)

    def nearest_plural(self) -> bool:
        """The number of the noun closest before the verb (the nearest-noun heuristic)."""
        return bool(NOUN_OF[self.words[(self.subject, *self.attractors)[-1]]][1])


def encode(words) -> list[int]:
    """Token ids of words; an unknown word is refused with the vocabulary named."""
    unknown = [w for w in words if w not in INDEX]
    if unknown:
        raise ValueError(f"unknown words {unknown}; the Mini-GPT knows {list(VOCAB[1:])}")
    return [INDEX[w] for w in words]


def parse(words) -> Sentence:
    """Read a generated sentence back: subject, attractors and main verb from the words alone."""
    nouns = [i for i, w in enumerate(words) if w in NOUN_OF]
    verb = next(i for i, w in enumerate(words) if w in VERB_OF)
    return Sentence(
        tuple(words), nouns[0], verb, tuple(nouns[1:]), bool(NOUN_OF[words[nouns[0]]][1])
    )


def relations(words) -> list[tuple[str, str]]:
    """Every (subject noun, verb) lemma pair of the sentence's clauses, from its words: the
    main clause's, and each relative clause's ("that the man holds" gives (man, holds))."""
    s = parse(words)
    pairs = [(NOUN_OF[words[s.subject]][0], VERB_OF[words[s.verb]][0])]
    for i, w in enumerate(words):
        if w in REL_OF:  # that the [adj] N holds: its subject is the noun just before
            pairs.append((NOUN_OF[words[i - 1]][0], REL_OF[w][0]))
    return pairs


def generate(
    rng: random.Random, *, test: bool, n_attractors: int | None = None, opposite: bool = False
) -> Sentence:
    """One sentence: a held-out main pair when ``test``, else a trained one; ``opposite`` makes
    every attractor's number the opposite of the subject's (else each is drawn at random)."""
    while True:
        noun, verb = rng.choice(NOUNS), rng.choice(VERBS)
        if ((noun[0], verb[0]) in HELD_OUT) == test:
            break
    plural = rng.random() < 0.5
    k = rng.randint(0, MAX_ATTRACTORS) if n_attractors is None else n_attractors
    words = ["<bos>", "the", *rng.sample(ADJECTIVES, rng.randint(0, 2)), noun[plural]]
    for _ in range(k):
        number = (not plural) if opposite else rng.random() < 0.5
        other = rng.choice(NOUNS)[number]
        if rng.random() < 0.5:
            words += [rng.choice(PREPOSITIONS), "the", other]
        else:
            words += ["that", "the", other, rng.choice(REL_VERBS)[number]]
    words += [verb[plural], "."]
    return parse(words)


def training_set(seed: int, size: int) -> list[Sentence]:
    """The whole training stream's sentences for ``seed``: training draws batches from these only.
    Attractors' numbers are random (about half differ from the subject's)."""
    rng = random.Random(seed)
    return [generate(rng, test=False) for _ in range(size)]


def test_set(seed: int, per_group: int) -> list[Sentence]:
    """Held-out sentences: for each attractor count 0–3, ``per_group`` with random attractor
    numbers and (for 1–3) ``per_group`` whose attractors all have the opposite number."""
    rng = random.Random(10_000_019 + seed)  # a stream apart from the training one
    out = []
    for k in range(MAX_ATTRACTORS + 1):
        out += [generate(rng, test=True, n_attractors=k) for _ in range(per_group)]
        if k:
            out += [
                generate(rng, test=True, n_attractors=k, opposite=True) for _ in range(per_group)
            ]
    return out


def overlap(train: list[Sentence], test: list[Sentence]) -> dict:
    """The disjointness proof, from the words: clauses of training sentences whose (subject,
    verb) pair is held out, and test main pairs that any training clause holds (both must be 0)."""
    trained = {p for s in train for p in relations(s.words)}
    return {
        "training_clauses_with_held_out_pair": sum(
            p in HELD_OUT for s in train for p in relations(s.words)
        ),
        "test_pairs_seen_in_training": sum(relations(s.words)[0] in trained for s in test),
        "test_pairs_not_held_out": sum(relations(s.words)[0] not in HELD_OUT for s in test),
        "held_out_pairs": sorted(" ".join(p) for p in HELD_OUT),
    }


def ids(sentences: list[Sentence]) -> np.ndarray:
    """(B, MAX_LEN) token ids, <pad> (0) after each sentence's end."""
    out = np.zeros((len(sentences), MAX_LEN), dtype=np.int64)
    for b, s in enumerate(sentences):
        out[b, : len(s.words)] = encode(s.words)
    return out


def other_form(word: str) -> str:
    """The main verb with the other number: is ↔ are, falls ↔ fall."""
    lemma = next(p for p in VERBS if word in p)
    return lemma[1 - lemma.index(word)]


def dump(directory, train: list[Sentence], test: list[Sentence]) -> tuple[str, str]:
    """Write train.txt and heldout.txt (one sentence a line, words separated by spaces)."""
    from pathlib import Path

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, sentences in (("train.txt", train), ("heldout.txt", test)):
        path = d / name
        path.write_text("".join(" ".join(s.words) + "\n" for s in sentences))
        paths.append(str(path))
    return paths[0], paths[1]
