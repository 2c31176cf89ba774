"""What the Mini-GPT learned about agreement, measured on held-out sentences only.

Accuracy: at the main verb, the right form's logit beats the other number's form of the same
verb (is vs are), predicted from the position before the verb. Reported per group of sentences
with its count and a 95% Wilson interval, next to the nearest-noun heuristic. Attribution: each
head's weight from that query to the subject and to the attractors, and the accuracy when the
head's output is zeroed or replaced by its mean (ablation).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from qkv.lab import corpus, minigpt

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for k successes in n trials:
    (p + z²/2n ± z·√(p(1−p)/n + z²/4n²)) / (1 + z²/n), p = k/n; (0, 1) when n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low, high = (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)
    return (0.0 if k == 0 else low), (1.0 if k == n else high)  # exact ends, no rounding


def groups(sentences: list[corpus.Sentence]) -> dict[str, np.ndarray]:
    """Boolean selections of the test sentences by what lies between subject and verb."""
    k = np.array([len(s.attractors) for s in sentences])
    opp = np.array([s.opposite() for s in sentences])
    out = {
        f"{n} attractor{'' if n == 1 else 's'}": k == n for n in range(corpus.MAX_ATTRACTORS + 1)
    }
    out["≥1 opposite-number attractor"] = opp >= 1
    out["all attractors opposite (≥1)"] = (k >= 1) & (opp == k)
    out["all held-out sentences"] = np.ones(len(sentences), bool)
    return out


def scored(correct: np.ndarray, sentences) -> dict[str, dict]:
    """{group: {correct, n, accuracy, low, high}} for a per-sentence boolean ``correct``."""
    out = {}
    for name, keep in groups(sentences).items():
        k, n = int(correct[keep].sum()), int(keep.sum())
        low, high = wilson(k, n)
        out[name] = {
            "correct": k,
            "n": n,
            "accuracy": k / n if n else float("nan"),
            "low": low,
            "high": high,
        }
    return out


def verb_correct(logits: np.ndarray, sentences) -> np.ndarray:
    """(N,) whether the right verb form outscores the other number's, one position earlier."""
    rows = np.arange(len(sentences))
    pos = np.array([s.verb for s in sentences])
    right = np.array([corpus.INDEX[s.words[s.verb]] for s in sentences])
    wrong = np.array([corpus.INDEX[corpus.other_form(s.words[s.verb])] for s in sentences])
    at = logits[rows, pos - 1]  # (N, vocab): the prediction of the word at pos
    return at[rows, right] > at[rows, wrong]


def nearest_noun_correct(sentences) -> np.ndarray:
    """(N,) whether taking the number of the noun nearest the verb is right."""
    return np.array([s.nearest_plural() == s.plural for s in sentences])


def head_weights(traces, sentences) -> dict[str, list]:
    """Per (layer, head): mean weight from the verb's query (position verb−1) to the subject, and
    to all attractors together, over sentences with ≥ 1 attractor."""
    rows = [(b, s) for b, s in enumerate(sentences) if s.attractors]
    on_subject = np.zeros((len(traces), traces[0].weights.shape[1]))  # (layers, heads)
    on_attractors = np.zeros_like(on_subject)
    for layer, tr in enumerate(traces):
        w = np.asarray(tr.weights)  # (B, heads, T, T)
        for b, s in rows:
            on_subject[layer] += w[b, :, s.verb - 1][:, s.subject]  # (heads,)
            on_attractors[layer] += w[b, :, s.verb - 1][:, list(s.attractors)].sum(-1)
    n = max(len(rows), 1)
    return {"subject": (on_subject / n).tolist(), "attractors": (on_attractors / n).tolist()}


def head_means(traces, data: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    """Each head's mean z (d_head,) over the real (non-pad) tokens: the mean-ablation value."""
    real = data != 0  # (B, T)
    return {
        (layer, h): np.asarray(tr.z)[:, h][real].mean(0)
        for layer, tr in enumerate(traces)
        for h in range(tr.z.shape[1])
    }


def evaluate(params: dict, config: minigpt.Config, sentences, *, ablations: bool = True) -> dict:
    """Accuracies by group; with ``ablations``, each head's weights and ablation effect."""
    data = corpus.ids(sentences)
    logits, traces = minigpt.forward(params, data, config, return_traces=True)
    correct = verb_correct(logits, sentences)
    out: dict[str, Any] = {"accuracy": scored(correct, sentences)}
    if not ablations:
        return out
    key = "≥1 opposite-number attractor"
    base = out["accuracy"][key]["accuracy"]
    weights = head_weights(traces, sentences)
    means = head_means(traces, data)
    table = []
    for (layer, h), mean in means.items():
        row = {
            "layer": layer,
            "head": h,
            "weight_on_subject": weights["subject"][layer][h],
            "weight_on_attractors": weights["attractors"][layer][h],
        }
        for how, value in (("zero", None), ("mean", mean)):
            acc = scored(
                verb_correct(
                    minigpt.forward(params, data, config, ablate={(layer, h): value}), sentences
                ),
                sentences,
            )[key]
            row[f"{how}_ablated_accuracy"] = acc["accuracy"]
            row[f"{how}_drop"] = base - acc["accuracy"]
        table.append(row)
    # the head whose verb-slot query weights the subject most over the attractors, and the
    # head whose ablation costs most: not always the same head, so both are reported
    top = max(table, key=lambda r: r["weight_on_subject"] - r["weight_on_attractors"])
    costly = max(table, key=lambda r: (r["mean_drop"], r["zero_drop"]))
    # the heads that look at the subject more than at the attractors, ablated together
    readers = [
        (r["layer"], r["head"]) for r in table if r["weight_on_subject"] > r["weight_on_attractors"]
    ]
    joint = {}
    for how in ("zero", "mean"):
        cut = {h: (None if how == "zero" else means[h]) for h in readers}
        acc = scored(
            verb_correct(minigpt.forward(params, data, config, ablate=cut), sentences), sentences
        )[key]["accuracy"]
        joint[f"{how}_ablated_accuracy"], joint[f"{how}_drop"] = acc, base - acc
    out.update(subject_heads={"heads": [f"{ly}.{h}" for ly, h in readers], **joint})
    out.update(
        ablation=table,
        ablation_group=key,
        top_head={"layer": top["layer"], "head": top["head"]},
        largest_drop_head={"layer": costly["layer"], "head": costly["head"]},
    )
    return out
