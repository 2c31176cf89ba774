"""Direct logit attribution: how much each part of a model wrote logit(target) − logit(baseline).

At position p the final residual y is a sum of parts (``qkv.hf.anatomy``):

    y = embed + Σ_layers (Σ_h z_h W_O^h + b_O) + Σ_layers mlp

and the logit difference is linear in y once the final norm's scale is frozen at y's own, as is
customary (the norm divides every part by the same rms(y); freezing it is what makes the parts
add up, and it is not what the model would do with one part alone):

    LD = (W_U[t] − W_U[b]) · N(y) + b_U[t] − b_U[b],   N(u) = center(u) ⊙ weight / rms(y) + bias

so each part's share is part · d, d = center(weight / rms(y) ⊙ (W_U[t] − W_U[b])), and the shares
sum to the model's own logit difference. Without a baseline, LD is logit(t) alone. A layer that
norms its attention output (Gemma 2) is read through that norm, its scale frozen the same way.
A head's share splits further by the key it read (z_h = Σ_j weights_j v_j):

    share_h = Σ_j weights_j · (v_j W_O^h) · d
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from qkv import checks, display, steps
from qkv.hf import session as sessions
from qkv.hf.anatomy import Anatomy, freeze, read
from qkv.hf.capture import Captured, capture, closes
from qkv.hf.tokens import Token, named, position_of, prompt_ids, texts, token_id
from qkv.reference import traced_steps


@dataclass
class KeySplit:
    """One head's share split by key: ``parts[j]`` = weights[j] · (v_j W_O^h) · d; the parts
    sum to ``value``, the head's share."""

    layer: int
    head: int
    value: float
    weights: np.ndarray  # (S,) the head's attention weights at the position
    parts: np.ndarray  # (S,)

    def to_dict(self) -> dict:
        return {
            "layer": self.layer,
            "head": self.head,
            "value": self.value,
            "weights": self.weights.tolist(),
            "parts": self.parts.tolist(),
        }


@dataclass
class Attribution:
    """Each part's share of ``logit_diff`` at ``position``: ``embed + heads.sum() + mlp.sum()
    + rest == logit_diff`` (float32 rounding aside). ``rest`` is the biases' share (attention
    output biases, the final norm's bias, the unembedding's), itemised in ``rest_parts``."""

    tokens: list[str]
    position: int
    target: Token
    baseline: Token | None
    logit_diff: float  # the model's own: its logits before any final soft-cap
    embed: float
    heads: np.ndarray  # (n_layers, n_heads)
    mlp: np.ndarray  # (n_layers,)
    rest: float
    rest_parts: dict[str, float]
    by_key: list[KeySplit]

    def total(self) -> float:
        """The sum of the shares (equals ``logit_diff``)."""
        return self.embed + float(self.heads.sum()) + float(self.mlp.sum()) + self.rest

    def top(self, n: int = 5) -> list[tuple[int, int, float]]:
        """The n heads with the largest |share|, as (layer, head, share)."""
        return top_heads(self.heads, n)

    def to_html(self, path=None, *, patching=None) -> str:
        """The "why this token" panel as one self-contained HTML file (``qkv.show(self)``
        drawn offline); ``patching``: a ``patching`` result of the same prompt."""
        return display.export_html(self, path, patching=patching)

    def to_dict(self) -> dict:
        """Plain lists and numbers (what JSON and a drawing need)."""
        return {
            "tokens": list(self.tokens),
            "position": self.position,
            "target": self.target.to_dict(),
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "logit_diff": self.logit_diff,
            "embed": self.embed,
            "heads": self.heads.tolist(),
            "mlp": self.mlp.tolist(),
            "rest": self.rest,
            "rest_parts": dict(self.rest_parts),
            "by_key": [k.to_dict() for k in self.by_key],
        }


def top_heads(grid: np.ndarray, n: int) -> list[tuple[int, int, float]]:
    """The n cells of a (n_layers, n_heads) grid with the largest |value|: (layer, head, value)."""
    order = np.argsort(-np.abs(grid), axis=None, kind="stable")[:n]
    rows, cols = np.unravel_index(order, grid.shape)
    return [(int(i), int(h), float(grid[i, h])) for i, h in zip(rows, cols, strict=True)]


def attribute(
    model, prompt, target, *, baseline=None, tokenizer=None, position: int = -1, by_key=5
) -> Attribution:
    """Direct logit attribution of ``logit(target) − logit(baseline)`` (or ``logit(target)``)
    at ``position`` of ``prompt`` (a text with ``tokenizer``, or token ids).

    ``target`` / ``baseline``: a token's text (one token: " Mary") or id. ``by_key``: split the
    shares of the top ``by_key`` heads by key (a second forward pass), or of the heads listed
    as (layer, head) pairs (one pass); 0 for none. The split needs the model to compute
    attention with ``attn_implementation="qkv"``; the rest works with any implementation.
    Memory: one (d_model,) vector per part, plus one (S,) row and (S, d_head) values per split
    head: never layers × heads × L².
    """
    anatomy = read(model)
    ids = prompt_ids(prompt, tokenizer)
    pos = position_of(position, ids.shape[1])
    vocab = anatomy.W_U().shape[0]
    t = token_id(target, tokenizer, vocab, what="target")
    b = None if baseline is None else token_id(baseline, tokenizer, vocab, what="baseline")
    asked = _asked(by_key, anatomy)
    if by_key is None or (isinstance(by_key, int) and by_key < 0):
        raise ValueError(f"by_key must be a count ≥ 0 or (layer, head) pairs, got {by_key!r}")
    if asked or (isinstance(by_key, int) and by_key > 0):
        sessions.check_uses_qkv(model)
    watch = KeyRows(asked, pos)
    got = capture(anatomy, ids, pos, session=_watching(model, watch))
    closes(anatomy, got)
    shares, reads = _shares(anatomy, got, t, b)
    if isinstance(by_key, int) and by_key > 0:
        watch = KeyRows([(i, h) for i, h, _ in top_heads(shares["heads"], by_key)], pos)
        capture(anatomy, ids, pos, session=_watching(model, watch))
    d_head = anatomy.d_head
    splits = []
    for i, h in watch.asked:
        weights, v = watch.rows[(i, h)]
        parts = weights * (v @ reads[i][h * d_head : (h + 1) * d_head])  # (S, d) @ (d,) -> (S,)
        splits.append(KeySplit(i, h, float(shares["heads"][i, h]), weights.numpy(), parts.numpy()))
    return Attribution(
        tokens=texts(tokenizer, ids[0].tolist()),
        position=pos,
        target=named(tokenizer, t),
        baseline=None if b is None else named(tokenizer, b),
        by_key=splits,
        **shares,
    )


def _asked(by_key, anatomy: Anatomy) -> list[tuple[int, int]]:
    if by_key is None or isinstance(by_key, (int, bool)):
        return []
    asked = []
    for pair in by_key:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"by_key pairs must be (layer, head), got {pair!r}")
        i, h = (int(x) for x in pair)
        if not (0 <= i < anatomy.n_layers and 0 <= h < anatomy.n_heads):
            raise ValueError(
                f"by_key head {pair!r} is outside this model's {anatomy.n_layers} layers × "
                f"{anatomy.n_heads} heads"
            )
        asked.append((i, h))
    return asked


def _watching(model, watch: KeyRows):
    return sessions.joined(model, watch=watch) if watch.asked else None


def _shares(anatomy: Anatomy, got: Captured, t: int, b: int | None):
    """Every part's share of the logit difference, and per layer what a z reads onto it."""
    # capture() made sure the run passed the embedding and the final norm
    assert got.embed is not None and got.final_in is not None and got.final_out is not None
    W_U = anatomy.W_U().detach()  # (vocab, d_model): only two rows are read
    du = W_U[t].double() - (W_U[b].double() if b is not None else 0.0)  # (d_model,)
    final = freeze(anatomy.final_norm, got.final_in)
    d = final.back(du)
    H, n = anatomy.n_heads, anatomy.n_layers
    heads, mlp = np.zeros((n, H)), np.zeros(n)
    biases, reads = 0.0, {}
    for i, block in enumerate(anatomy.blocks):
        d_i = d
        if block.attn_after is not None:  # a norm after the attention: read through it
            after = freeze(block.attn_after, got.attn[i])
            d_i = after.back(d)
            biases += 0.0 if after.bias is None else float(after.bias @ d)
        with torch.no_grad():
            reads[i] = anatomy.W_O(i).double() @ d_i  # (H·d_head, d_model) @ (d_model,)
        heads[i] = (got.z[i].double() * reads[i]).reshape(H, anatomy.d_head).sum(-1).numpy()
        b_O = anatomy.b_O(i)
        biases += 0.0 if b_O is None else float(b_O.detach().double() @ d_i)
        mlp[i] = float(got.mlp_added[i].double() @ d)
    b_U = anatomy.b_U()
    unembed_bias = 0.0
    if b_U is not None:
        b_U = b_U.detach().double()
        unembed_bias = float(b_U[t] - (b_U[b] if b is not None else 0.0))
    rest_parts = {
        "attention biases": biases,
        "final norm bias": 0.0 if final.bias is None else float(final.bias @ du),
        "unembedding bias": unembed_bias,
    }
    with torch.no_grad():
        own = anatomy.unembed(got.final_out[None])[0].double()  # (vocab,): before any soft-cap
    shares = dict(
        logit_diff=float(own[t] - (own[b] if b is not None else 0.0)),
        embed=float(got.embed.double() @ d),
        heads=heads,
        mlp=mlp,
        rest=float(sum(rest_parts.values())),
        rest_parts=rest_parts,
    )
    return shares, reads


class KeyRows:
    """A session's watcher: for each asked (layer, head), the weights row at ``pos`` and the
    values it weighs, computed by qkv's engine from the layer's checked problem (one query)."""

    def __init__(self, asked: list[tuple[int, int]], pos: int):
        self.asked, self.pos = list(asked), pos
        self.rows: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def __call__(self, index: int, module, p) -> None:
        for i, h in self.asked:
            if i == index:
                self.rows[(i, h)] = row(p, h, self.pos)


def _pick(a, h: int, pos: int):
    """Sequence 0, head h and query row pos of a per-head (..., H, L, S) array; axes of size 1
    (shared) are kept as they are."""
    if a is None:
        return None
    if a.ndim >= 2 and a.shape[-2] > 1:
        a = a[..., pos : pos + 1, :]
    if a.ndim >= 3 and a.shape[-3] > 1:
        a = a[..., h : h + 1, :, :]
    if a.ndim >= 4 and a.shape[0] > 1:
        a = a[:1]
    return a


def row(p, h: int, pos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Head h's weights at query ``pos`` of sequence 0, (S,), and the values it weighs,
    (S, d_v), in float64: the engine's steps on that one query."""
    g = steps.kv_head(h, p.q.shape[-3], p.k.shape[-3])
    one = p._replace(
        q=p.q[:1, h : h + 1, pos : pos + 1],  # (1, 1, 1, d)
        k=p.k[:1, g : g + 1],
        v=p.v[:1, g : g + 1],
        mask=_pick(checks.effective_mask(p), h, pos),
        causal=None,
        bias=_pick(p.bias, h, pos),
        sinks=_pick(p.sinks, h, pos),
    )
    kept, _ = traced_steps(one)
    return kept["weights"][0, 0, 0].double(), one.v[0, 0].double()
