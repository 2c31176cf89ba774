"""A layer of a long text in words that fit a terminal: the selected query's heaviest keys and
each head's statistics (``Trace.top_keys``, ``Trace.head_stats``), never an L × L table.

``qkv explain --model`` prints this instead of the walkthrough past ``WALK_TOKENS`` tokens;
``summary_json`` is the same numbers for ``--format json``.
"""

from __future__ import annotations

import math

import numpy as np

from qkv.explain.format import Section, Table, section
from qkv.explain.tokens import labels

WALK_TOKENS = 64  # the walkthrough prints a row per token; past this a layer is summarised
TOP = 10  # keys listed for the selected query


def summary_json(trace, i: int, head: int, *, top: int = TOP) -> dict:
    """The selected query's ``top`` heaviest keys for ``head`` and every head's statistics:
    means over the queries, and the query's own numbers."""
    names = labels(trace.tokens, len(trace.tokens))
    best = trace.top_keys(top, head=head, rows=[i])
    stats = trace.head_stats()  # (n_heads, L) each
    heads = []
    for h in range(trace.settings["n_heads"]):
        one = trace.top_keys(1, head=h, rows=[i])
        j = int(one.keys[0, 0])
        heads.append(
            {
                "head": h,
                **{
                    f"mean_{name}": _mean(stats[name][h])
                    for name in ("entropy", "max", "first", "previous")
                },
                "query_entropy": float(stats["entropy"][h, i]),
                "query_top_key": {
                    "position": j,
                    "token": names[j],
                    "weight": float(one.weights[0, 0]),
                },
            }
        )
    return {
        "tokens": len(names),
        "query": {"position": i, "token": names[i]},
        "head": head,
        "top_keys": [
            {"position": int(j), "token": names[int(j)], "weight": float(w)}
            for j, w in zip(best.keys[0], best.weights[0], strict=True)
        ],
        "query_entropy": float(stats["entropy"][head, i]),
        "heads": heads,
    }


def summary(trace, i: int, head: int, *, title: str, top: int = TOP) -> list[Section]:
    """Sections for the terminal: the query's heaviest keys, then a row per head."""
    d = summary_json(trace, i, head, top=top)
    shown = sum(k["weight"] for k in d["top_keys"])
    keys = Table(
        ("rank", "key", "weight"),
        tuple((str(r + 1), k["token"], f"{k['weight']:.4f}") for r, k in enumerate(d["top_keys"])),
    )
    ent = d["query_entropy"]
    first = section(
        f"{title}: query {d['query']['token']}, head {head} — its {len(d['top_keys'])} heaviest keys",
        keys,
        f"these keys hold {shown:.4f} of the weight; entropy {ent:.3f} nats "
        f"(≈ {math.exp(ent):.1f} keys' worth of attention) over {d['tokens']} tokens",
    )
    rows = tuple(
        (
            str(h["head"]),
            _num(h["mean_entropy"], 2),
            _num(h["mean_max"], 3),
            _num(h["mean_first"], 3),
            _num(h["mean_previous"], 3),
            f"{h['query_top_key']['token']} {h['query_top_key']['weight']:.3f}",
        )
        for h in d["heads"]
    )
    heads = section(
        "every head of this layer, averaged over the queries",
        Table(
            ("head", "entropy", "max weight", "on first", "on previous", "this query's top key"),
            rows,
        ),
        "entropy in nats (0: one key takes everything); max weight: the heaviest key's share; "
        "on first / on previous: the weight on the first token and on the token just before",
    )
    return [first, heads]


def _mean(a: np.ndarray) -> float | None:
    """The mean of the defined values (None when there are none: JSON has no NaN)."""
    a = a[~np.isnan(a)]
    return float(a.mean()) if a.size else None


def _num(x, digits: int) -> str:
    return "–" if x is None else f"{x:.{digits}f}"
