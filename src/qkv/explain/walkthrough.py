"""A trace told step by step, with the real numbers, for one selected query token.

``walkthrough(trace, i, head=)`` returns ``Section`` objects (title, lines, and tables as blocks);
``render_plain`` / ``render_markdown`` / ``render_rich`` (from ``qkv.explain.format``) print them. The
terminal, the web page and the docs all use these sections, so the prose lives here once.

The steps follow the project's vocabulary:
x → q, k, v → scores → scaled → tempered → masked → weights → z (→ head_out → out).
"""

from __future__ import annotations

import math

import numpy as np

from qkv.explain.format import (
    Block,
    Formula,
    Section,
    Table,
    render_markdown,
    render_plain,
    render_rich,
    section,
)
from qkv.explain.numbers import ROUNDED, dot_terms, equals, factor, fmt, vec
from qkv.explain.softmax_section import is_default_scale, softmax_section, tau_text
from qkv.explain.tokens import labels, select_label, visible
from qkv.steps import kv_head

__all__ = [
    "walkthrough",
    "Section",
    "Table",
    "render_plain",
    "render_markdown",
    "render_rich",
    "fmt",
    "vec",
    "dot_terms",
    "labels",
    "visible",
    "select_label",
    "ROUNDED",
]

FULL_MATRIX_MAX = 36  # matrices with at most this many entries are printed in full


def _matrix(
    a, rows: list[str], prefix: str, digits: int = 2, limit: int = 8, highlight: int | None = None
) -> Table:
    a = np.asarray(a)
    cols = [f"{prefix}[{c}]" for c in range(min(a.shape[1], limit))]
    more = a.shape[1] > limit
    body = tuple(
        (rows[r], *(fmt(e, digits) for e in a[r, :limit]), *(("…",) if more else ()))
        for r in range(a.shape[0])
    )
    return Table(("", *cols, *(("…",) if more else ())), body, highlight)


def walkthrough(
    trace, i: int, *, head: int | None = None, projections: dict | None = None
) -> list[Section]:
    """The steps of attention for query i of a trace (one head when there are several).

    projections: optional {"W_Q", "W_K", "W_V"} (2-D, or 3-D with heads first) to print the
    projections in full when they are small.
    """
    trace = trace.numpy()
    s = trace.settings
    heads = s.get("n_heads")
    kv = None
    if not heads:
        head = None  # a trace without a head axis has one head; head= is ignored
    else:
        head = 0 if head is None else head
        if not 0 <= head < heads:
            raise ValueError(f"head must be in [0, {heads}), got {head}")
        kv = kv_head(head, heads, s.get("n_kv_heads"))
    pick = (lambda a: a[..., head, :, :]) if heads else (lambda a: a)
    pick_kv = (lambda a: a[..., kv, :, :]) if heads else (lambda a: a)

    W = pick(trace["weights"])  # (L, S)
    if W.ndim != 2:
        raise ValueError(
            f"walkthrough explains one sequence: expected weights of shape "
            f"([n_heads,] L, S), got {tuple(trace['weights'].shape)}"
        )
    L, S = W.shape
    if not -L <= i < L:
        raise ValueError(f"query index must be in [0, {L}), got {i}")
    i %= L
    rows = labels(trace.tokens, L)
    cols = labels(trace.key_tokens or (trace.tokens if S == L else None), S)
    me = rows[i]
    mask = s.get("mask")
    full = None if mask is None else np.broadcast_to(mask, trace["weights"].shape)
    mask_row = np.ones(S, bool) if full is None else pick(full)[i]
    where = f" (head {head})" if heads else ""
    sections = []

    if "x" in trace:
        x = trace["x"]
        title = f"1. input vectors X ({x.shape[0]}×{x.shape[1]}, one row per token)"
        sections.append(
            section(
                title, _matrix(x, rows, "x", highlight=i), f"selected query: {me} (position {i})"
            )
        )
    sections.append(_projections(trace, i, rows, cols, where, pick, pick_kv, projections, head))
    sections.append(_scores(trace, i, rows, cols, pick, pick_kv, mask_row))
    sections.append(softmax_section(trace, i, rows, cols, pick, mask_row, head))
    sections.append(_mix(trace, i, rows, cols, pick, pick_kv, head))
    if heads and "head_out" in trace:
        sections.append(_heads(trace, i, rows))

    sections.append(
        Section("formula", tuple(Formula(line) for line in formula(s, biased="biased" in trace)))
    )
    return [_with_note(sec) for sec in sections]


def _with_note(sec: Section) -> Section:
    """The section, with the ≈ note added when one of its lines uses ≈."""
    if not any(isinstance(b, str) and " ≈ " in b for b in sec.blocks):
        return sec
    return section(sec.title, *sec.blocks, ROUNDED)


def formula(s: dict, *, biased: bool = False) -> list[str]:
    """The one-line formula filled with a trace's shapes, scale and τ (and the head sum), with
    soft-capping, a bias (``biased``) and a sink when the trace has them."""
    L, S, d_k, d_v, tau = s["L"], s["S"], s["d_k"], s["d_v"], s["temperature"]
    shape = f"Q ({L}×{d_k}), K ({S}×{d_k}), V ({S}×{d_v})"
    inner = "QKᵀ/√d_k/τ" if is_default_scale(s) else "QKᵀ·c/τ"
    if s.get("softcap") is not None:
        inner = f"cap·tanh({inner} ÷ cap)"
    if biased:
        inner = f"{inner} + B"
    softmax = "softmax₊sink" if s.get("sinks") else "softmax"
    if is_default_scale(s):
        head = f"{softmax}(mask({inner}))·V with {shape}, √d_k = {fmt(math.sqrt(d_k), 3)}"
    else:
        head = (
            f"{softmax}(mask({inner}))·V with {shape}, c = {fmt(s['scale'], 3)} in place of 1/√d_k"
        )
    extra = [
        f"cap = {fmt(s['softcap'], 3)}" if s.get("softcap") is not None else "",
        "B: the bias" if biased else "",
        "softmax₊sink: a sink logit joins each row's denominator" if s.get("sinks") else "",
    ]
    head += "".join(f", {e}" for e in extra if e)
    lines = [f"Z = {head}, τ = {tau_text(tau)} → Z ({L}×{d_v})"]
    if s.get("n_heads"):
        lines[0] = f"per head: {lines[0]}"
        lines.append(
            f"out = Σ_h Z_h·W_O^h + b_O over {s['n_heads']} heads "
            f"({s.get('n_kv_heads') or s['n_heads']} K/V heads)"
        )
    return lines


def _projections(trace, i, rows, cols, where, pick, pick_kv, projections, head):
    q, k, v = pick(trace["q"]), pick_kv(trace["k"]), pick_kv(trace["v"])
    me = rows[i]
    blocks: list[Block] = []
    if projections and "x" in trace:
        x = trace["x"]
        mats = {name: _head_matrix(projections, name, head) for name in ("W_Q", "W_K", "W_V")}
        for name, Wm in mats.items():
            if Wm.size <= FULL_MATRIX_MAX:
                blocks.append(f"{name} ({Wm.shape[0]}×{Wm.shape[1]}):")
                blocks.append(_matrix(Wm, [f"x[{r}]" for r in range(Wm.shape[0])], "col"))
        Wq = mats["W_Q"]
        if Wq.size <= FULL_MATRIX_MAX and Wq.shape[0] <= 4:
            blocks.append(f"q[{me}] = x[{me}]·W_Q, one column at a time:")
            blocks += [
                Formula(f"  q[{me}][{c}] = {dot_terms(x[i], Wq[:, c])}") for c in range(Wq.shape[1])
            ]
    if "rope" in trace and head is not None:
        blocks += _rotary(trace, i, me, head, q)
        blocks.append(
            "every key k = RoPE(x·W_K) (what a token offers to be matched on, turned "
            "by its position) and value v = x·W_V (what it hands back, not turned):"
        )
    else:
        blocks.append(Formula(f"q[{me}] = x[{me}]·W_Q = {vec(q[i])}"))
        blocks.append(
            "every key k = x·W_K (what a token offers to be matched on) and value "
            "v = x·W_V (what it hands back):"
        )
    if k.shape[1] + v.shape[1] <= 12:
        kv = np.concatenate([k, v], axis=1)  # (S, d_k + d_v)
        names = [f"k[{c}]" for c in range(k.shape[1])] + [f"v[{c}]" for c in range(v.shape[1])]
        blocks.append(Table(("", *names), _matrix(kv, cols, "", limit=kv.shape[1]).rows))
    else:
        blocks += [_matrix(k, cols, "k"), _matrix(v, cols, "v")]
    return section(f"2. projections: query, keys and values{where}", *blocks)


def _rotary(trace, i, me, head, q) -> list[Block]:
    """Lines for a rotary model: q and k in the trace are after RoPE; the ``rope`` step holds
    them before rotation, the n_heads query heads then the n_kv_heads key heads."""
    before = trace["rope"][..., head, :, :][i]  # (d_head,)
    base = trace.settings.get("rope_base")
    return [
        "q and k are taken after the rotary position embedding: q = RoPE(x·W_Q), "
        "k = RoPE(x·W_K); RoPE turns each pair of dimensions by an angle proportional to "
        "the token's position" + (f" (base {base:g})" if base else "") + ", so q·k "
        "depends on how far apart the two tokens are",
        Formula(f"before rotation: x[{me}]·W_Q = {vec(before)}"),
        Formula(f"after rotation (position {i}): q[{me}] = RoPE(x[{me}]·W_Q) = {vec(q[i])}"),
    ]


def _head_matrix(projections, name: str, head) -> np.ndarray:
    """One head's (d_model, d_head) slice of W_Q, W_K or W_V (K/V heads shared in groups)."""
    W = np.asarray(projections[name])
    if W.ndim == 2:
        return W
    return W[kv_head(head, np.asarray(projections["W_Q"]).shape[0], W.shape[0])]


def _scores(trace, i, rows, cols, pick, pick_kv, mask_row):
    q, k = pick(trace["q"]), pick_kv(trace["k"])
    scores = pick(trace["scores"])[i]
    me = rows[i]
    S = scores.shape[0]
    table = Table(("key", f"score = q[{me}]·k"), tuple((cols[j], fmt(scores[j])) for j in range(S)))
    blocks: list[Block] = [f"each key is compared with q[{me}] by a dot product:", table]
    if S:
        shown = np.where(mask_row, scores, -np.inf)
        best = int(np.argmax(shown)) if mask_row.any() else int(np.argmax(scores))
        which = (
            ""
            if mask_row.all()
            else " among the keys it may see"
            if mask_row.any()
            else " (every key is masked for it)"
        )
        blocks.append(f"term by term, the highest one{which}:")
        blocks.append(Formula(f"  q[{me}]·k[{cols[best]}] = {dot_terms(q[i], k[best])}"))
    return section("3. scores = q·kᵀ", *blocks)


def _mix(trace, i, rows, cols, pick, pick_kv, head):
    me = rows[i]
    w = pick(trace["weights"])[i]
    v = pick_kv(trace["v"])
    terms = trace.contributions(i, head=head) if head is not None else trace.contributions(i)
    z = pick(trace["z"])[i]
    S, d_v = terms.shape
    short = 8 if d_v <= 8 else 4  # two long vectors side by side: keep each row readable
    table = Table(
        ("key", "weight", "v", "weight × v"),
        tuple(
            (cols[j], fmt(w[j], 3), vec(v[j], limit=short), vec(terms[j], limit=short))
            for j in range(S)
        ),
    )
    blocks: list[Block] = [
        "each key hands back its value v, scaled by its weight:",
        table,
        "z adds those rows up, one dimension at a time:",
    ]
    for d in range(min(d_v, 8)):
        parts = " + ".join(factor(t, 2) for t in terms[:, d]) if S <= 12 else "…"
        shown = sum(float(fmt(t)) for t in terms[:, d]) if S <= 12 else None
        blocks.append(Formula(f"z[{d}] = {parts}{equals(shown, z[d])}"))
    if d_v > 8:
        blocks.append(Formula(f"… ({d_v} dimensions in all)"))
    blocks.append(Formula(f"z[{me}] = {vec(z)}"))
    return section("5. z = Σ_j weight_j·v_j", *blocks)


def _heads(trace, i, rows):
    s = trace.settings
    me = rows[i]
    H = s["n_heads"]
    head_out, out = trace["head_out"][..., i, :], trace["out"][i]  # (H, d_model), (d_model,)
    b_O = out - head_out.sum(axis=0)  # what the trace implies for the bias
    blocks: list[Block] = [Formula(f"head {h}: z = {vec(trace['z'][h][i])}") for h in range(H)]
    d_model = out.shape[-1]
    n = min(d_model, 8)
    body = [(f"head {h}: z·W_O^{h}", *(fmt(e) for e in head_out[h][:n])) for h in range(H)]
    body.append(("b_O", *(fmt(e) for e in b_O[:n])))
    body.append(("out = Σ_h + b_O", *(fmt(e) for e in out[:n])))
    blocks.append(
        f"each head's z goes through its own W_O^h into the model's {d_model} "
        f"dimensions, then they are added:"
    )
    blocks.append(Table(("", *(f"out[{c}]" for c in range(n))), tuple(body)))
    shown = np.array([[float(c) for c in r[1:]] for r in body[:-1]]).sum(axis=0)  # (n,)
    if [fmt(e) for e in shown] != list(body[-1][1:]):
        blocks.append(
            "the rows above are rounded to 2 decimals, so they may not add up to out "
            "exactly; out adds their unrounded values"
        )
    blocks.append(Formula(f"out[{me}] = {vec(out)}"))
    return section("6. heads combined: out = Σ_h z_h·W_O^h + b_O", *blocks)
