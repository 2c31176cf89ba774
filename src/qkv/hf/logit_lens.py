"""The logit lens: read the residual stream after each layer as if it were the last.

    logits_i = W_U · final_norm(residual after layer i) + b_U     (soft-capped where the model is)

At the last layer this is the model's own prediction. Each layer gives its top-k tokens with
their probabilities and the target's rank (1 = the likeliest).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from qkv.hf.anatomy import read
from qkv.hf.capture import capture
from qkv.hf.tokens import Token, named, position_of, prompt_ids, texts, token_id


@dataclass
class Lens:
    """Per layer i (the residual after layer i): ``ids[i]`` and ``p[i]`` of its top-k tokens,
    ``labels[i]`` their texts, ``target_rank[i]`` (1 = top; None without a target)."""

    tokens: list[str]
    position: int
    target: Token | None
    ids: np.ndarray  # (n_layers, k)
    p: np.ndarray  # (n_layers, k)
    labels: list[list[str]]
    target_rank: np.ndarray | None  # (n_layers,)

    def to_dict(self) -> dict:
        layers = []
        for i in range(len(self.ids)):
            top = [
                {"token": t, "id": int(j), "p": float(q)}
                for t, j, q in zip(self.labels[i], self.ids[i], self.p[i], strict=True)
            ]
            rank = None if self.target_rank is None else int(self.target_rank[i])
            layers.append({"layer": i, "top": top, "target_rank": rank})
        return {
            "tokens": list(self.tokens),
            "position": self.position,
            "target": None if self.target is None else self.target.to_dict(),
            "layers": layers,
        }


def lens(model, prompt, *, target=None, tokenizer=None, position: int = -1, top_k: int = 5) -> Lens:
    """The logit lens of ``prompt`` (a text with ``tokenizer``, or ids) at ``position``: each
    layer's top ``top_k`` tokens and, with ``target`` (a token's text or id), its rank."""
    anatomy = read(model)
    ids = prompt_ids(prompt, tokenizer)
    pos = position_of(position, ids.shape[1])
    vocab = anatomy.W_U().shape[0]
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= vocab:
        raise ValueError(f"top_k must be an int in [1, {vocab}], got {top_k!r}")
    t = None if target is None else token_id(target, tokenizer, vocab, what="target")
    got = capture(anatomy, ids, pos)
    resid = torch.stack([got.resid[i] for i in range(anatomy.n_layers)])  # (n_layers, d_model)
    with torch.no_grad():
        logits = anatomy.logits(anatomy.final_norm(resid[:, None])[:, 0]).double()  # (n, vocab)
    logp = torch.log_softmax(logits, -1)
    values, top = torch.topk(logp, top_k, dim=-1)  # (n_layers, k)
    rank = None
    if t is not None:  # 1 + how many tokens score above the target
        rank = (1 + (logits > logits[:, t : t + 1]).sum(-1)).numpy()
    return Lens(
        tokens=texts(tokenizer, ids[0].tolist()),
        position=pos,
        target=None if t is None else named(tokenizer, t),
        ids=top.numpy(),
        p=values.exp().numpy(),
        labels=[texts(tokenizer, row) for row in top.tolist()],
        target_rank=rank,
    )
