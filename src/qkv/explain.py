"""A trace told step by step, with the real numbers, for one selected query token.

``walkthrough(trace, i)`` returns sections (title, lines); ``render_plain`` joins them as text.
The terminal, the web page and the docs all use these sections, so the prose lives here once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qkv.ops import entropy


@dataclass(frozen=True)
class Section:
    title: str
    lines: tuple[str, ...]


def fmt(x: float, digits: int = 2) -> str:
    """A number as the walkthrough prints it: fixed decimals, −∞ for masked scores."""
    if x == -math.inf:
        return "-inf"
    if x == math.inf:
        return "inf"
    if math.isnan(x):
        return "nan"
    text = f"{x:.{digits}f}"
    return "0." + "0" * digits if text == "-0." + "0" * digits else text


def vec(a, digits: int = 2, limit: int = 8) -> str:
    """A vector as [a, b, c], abbreviated with … past ``limit`` entries."""
    a = np.asarray(a).ravel()
    items = [fmt(float(e), digits) for e in a[:limit]]
    if a.size > limit:
        items.append(f"… ({a.size} in all)")
    return "[" + ", ".join(items) + "]"


def dot_terms(q, k, digits: int = 2, limit: int = 8) -> str:
    """q·k written out term by term: 1.00×0.50 + 0.20×(−1.00) + … = 0.71."""
    terms = []
    for a, b in list(zip(q, k))[:limit]:
        b_text = fmt(float(b), digits)
        terms.append(f"{fmt(float(a), digits)}×{'(' + b_text + ')' if b < 0 else b_text}")
    if len(q) > limit:
        terms.append("…")
    return " + ".join(terms) + f" = {fmt(float(np.dot(q, k)), digits)}"


def _labels(trace, n):
    toks = trace.tokens
    return list(toks) if toks and len(toks) == n else [str(j) for j in range(n)]


def walkthrough(trace, i: int, *, head: int | None = None) -> list[Section]:
    """The five steps of attention for query i of a NumPy trace (one head when there are several)."""
    s = trace.settings
    heads = s.get("n_heads")
    if heads and head is None:
        head = 0
    if heads and not 0 <= head < heads:
        raise ValueError(f"head must be in [0, {heads}), got {head}")
    pick = (lambda a: a[head]) if heads else (lambda a: a)
    kv_head = head // (heads // (s.get("n_kv_heads") or heads)) if heads else None
    pick_kv = (lambda a: a[kv_head]) if heads else (lambda a: a)

    q, k, v = pick(trace["q"]), pick_kv(trace["k"]), pick_kv(trace["v"])
    w = pick(trace["weights"])[i]
    L, S = pick(trace["weights"]).shape
    rows, cols = _labels(trace, L), _labels(trace, S)
    me = rows[i]
    mask_row = np.ones(S, bool) if s.get("mask") is None else np.broadcast_to(
        s["mask"], pick(trace["weights"]).shape)[i]
    sections = []

    if "x" in trace:
        x = trace["x"]
        sections.append(Section("1. input vectors X", tuple(
            f"{rows[j]:>10}  {vec(x[j])}" for j in range(x.shape[0]))))
    where = f" (head {head})" if heads else ""
    qkv_lines = [f"q[{me}] = x[{me}]·W_Q = {vec(q[i])}"]
    qkv_lines += [f"{cols[j]:>10}  k = {vec(k[j])}   v = {vec(v[j])}" for j in range(S)]
    sections.append(Section(f"2. query, keys and values{where}", tuple(qkv_lines)))

    scores = pick(trace["scores"])[i]
    best = int(np.argmax(np.where(mask_row, scores, -np.inf))) if S else None
    score_lines = [f"score[{me}, {cols[j]}] = q·k = {fmt(float(scores[j]))}" for j in range(S)]
    if best is not None:
        score_lines.append(f"for example q[{me}]·k[{cols[best]}] = {dot_terms(q[i], k[best])}")
    sections.append(Section("3. scores = q·kᵀ", tuple(score_lines)))

    d_k, scale_, tau = s["d_k"], s["scale"], s["temperature"]
    soft = []
    if math.isclose(scale_, 1 / math.sqrt(d_k)) if d_k else False:
        soft.append(f"scaled = scores ÷ √d_k = scores ÷ √{d_k} = scores ÷ {fmt(math.sqrt(d_k), 3)}")
    else:
        soft.append(f"scaled = scores × {fmt(scale_, 3)} (scaling {'off' if scale_ == 1 else 'set'})")
    soft.append(f"scaled:   {vec(pick(trace['scaled'])[i], limit=S)}")
    soft.append(f"tempered = scaled ÷ τ = scaled ÷ {fmt(tau, 3)}: "
                f"{vec(pick(trace['tempered'])[i], limit=S)}")
    hidden = [cols[j] for j in range(S) if not mask_row[j]]
    if hidden:
        why = f"causal ({s['causal']}): keys after {me} are hidden" if s.get("causal") else "mask"
        soft.append(f"masked: {', '.join(hidden)} set to -inf ({why})")
    else:
        soft.append("masked: nothing is masked")
    soft.append(f"weights = softmax(masked) = {vec(w, 3, limit=S)}")
    soft.append(f"sum of weights = {fmt(float(w.sum()), 3)}")
    ent = float(entropy(w))
    soft.append(f"entropy = {fmt(ent, 3)} nats; effective number of attended tokens = "
                f"exp(entropy) = {fmt(math.exp(ent), 2)} of {int(mask_row.sum())}")
    sections.append(Section("4. scaled → tempered → masked → weights", tuple(soft)))

    terms = w[:, None] * v  # (S, d_v): w_j·v_j
    z = pick(trace["z"])[i]
    out_lines = [f"{cols[j]:>10}  {fmt(float(w[j]), 3)} × {vec(v[j])} = {vec(terms[j])}"
                 for j in range(S)]
    for d in range(min(z.shape[-1], 8)):
        parts = " + ".join(fmt(float(t)) for t in terms[:, d])
        out_lines.append(f"z[{d}] = {parts} = {fmt(float(z[d]))}")
    out_lines.append(f"z[{me}] = {vec(z)}")
    sections.append(Section("5. z = Σ_j w_j·v_j", tuple(out_lines)))

    if heads and "head_out" in trace:
        multi = []
        for h in range(heads):
            multi.append(f"head {h}: z = {vec(trace['z'][h][i])} → z·W_O^{h} = "
                         f"{vec(trace['head_out'][h][i])}")
        multi.append(f"out = Σ_h head_out + b_O = {vec(trace['out'][i])}")
        sections.append(Section("6. heads combined through W_O", tuple(multi)))

    shape = f"Q ({L}×{d_k}), K ({S}×{d_k}), V ({S}×{s['d_v']})"
    sections.append(Section("formula", (
        f"softmax(mask(QKᵀ/√d_k)/τ)·V with {shape}, √d_k = {fmt(math.sqrt(d_k), 3)}, "
        f"τ = {fmt(tau, 3)} → ({L}×{s['d_v']})",)))
    return sections


def render_plain(sections: list[Section]) -> str:
    out = []
    for sec in sections:
        out.append(sec.title)
        out.extend("  " + line for line in sec.lines)
        out.append("")
    return "\n".join(out)
