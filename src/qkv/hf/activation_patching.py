"""Activation patching: put one part of a clean run into a corrupted run, and see how much of the
clean logit difference comes back.

    score = (LD_patched − LD_corrupted) / (LD_clean − LD_corrupted)

1 means the part alone restores the clean answer, 0 that it changes nothing. LD is
logit(target) − logit(baseline) (or logit(target)) at one position, the logits as the
unembedding gives them (before any final soft-cap). Three parts are patched, one at a time:

    heads      a head's z (o_proj's input slice) at every position, from the clean run
    residual   the residual stream entering a layer, at one position
    patterns   a head's attention weights alone (z = clean weights · the corrupted run's v)

Each forward pass runs the clean prompt as sequence 0 beside up to ``batch`` corrupted copies,
each patched from sequence 0 as the layer runs, so no clean activation is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from qkv import steps
from qkv.hf import session as sessions
from qkv.hf.anatomy import Anatomy, read
from qkv.hf.capture import hidden_of, hooked
from qkv.hf.tokens import Token, named, position_of, prompt_ids, texts, token_id


@dataclass
class Patching:
    """Scores of patching each part from the clean run into the corrupted one (see the module)."""

    tokens: list[str]  # the clean prompt's
    corrupted_tokens: list[str]
    position: int
    target: Token
    baseline: Token | None
    clean: float  # LD of the clean run
    corrupted: float  # LD of the corrupted run
    heads: np.ndarray  # (n_layers, n_heads)
    residual: np.ndarray | None  # (n_layers, L): the residual entering layer i at position j
    patterns: np.ndarray | None  # (n_layers, n_heads)

    def to_dict(self) -> dict:
        def listed(a):
            return None if a is None else a.tolist()

        return {
            "tokens": list(self.tokens),
            "corrupted_tokens": list(self.corrupted_tokens),
            "position": self.position,
            "target": self.target.to_dict(),
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "clean": self.clean,
            "corrupted": self.corrupted,
            "heads": self.heads.tolist(),
            "residual": listed(self.residual),
            "patterns": listed(self.patterns),
        }


def patching(
    model,
    clean,
    corrupted,
    target,
    *,
    baseline=None,
    tokenizer=None,
    position: int = -1,
    residual: bool = True,
    patterns: bool = True,
    batch: int = 16,
) -> Patching:
    """Patch every head's z, (with ``residual``) the residual at every layer × position and
    (with ``patterns``) every head's weights from ``clean`` into ``corrupted`` (prompts of equal
    length: texts with ``tokenizer``, or ids); score each by how much of LD_clean − LD_corrupted
    it restores. ``patterns`` needs ``attn_implementation="qkv"`` and computes each layer's
    weights in full (batch × heads × L² numbers per layer while it runs)."""
    anatomy = read(model)
    ids_c, ids_x = prompt_ids(clean, tokenizer), prompt_ids(corrupted, tokenizer)
    if ids_c.shape[1] != ids_x.shape[1]:
        raise ValueError(
            f"the clean and corrupted prompts must have the same number of tokens, got "
            f"{ids_c.shape[1]} (clean) and {ids_x.shape[1]} (corrupted)"
        )
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an int ≥ 1, got {batch!r}")
    if patterns:
        sessions.check_uses_qkv(model)
    L = ids_c.shape[1]
    pos = position_of(position, L)
    vocab = anatomy.W_U().shape[0]
    t = token_id(target, tokenizer, vocab, what="target")
    b = None if baseline is None else token_id(baseline, tokenizer, vocab, what="baseline")
    run = Runs(anatomy, ids_c, ids_x, pos, t, b, batch)
    ld_clean, ld_corrupted = run.lds(torch.cat([ids_c, ids_x]))
    gap = ld_clean - ld_corrupted
    if not abs(gap) > 1e-6 * max(abs(ld_clean), abs(ld_corrupted), 1.0):
        raise ValueError(
            f"the clean and corrupted prompts give the same logit difference ({ld_clean:.6g}); "
            f"patching measures how much of their difference comes back: choose prompts that "
            f"differ in it"
        )
    H, n = anatomy.n_heads, anatomy.n_layers
    heads = run.sweep([(i, h) for i in range(n) for h in range(H)], run.swap_z)
    res = (
        run.sweep([(i, j) for i in range(n) for j in range(L)], run.swap_residual)
        if residual
        else None
    )
    pat = (
        run.sweep([(i, h) for i in range(n) for h in range(H)], run.swap_weights)
        if patterns
        else None
    )

    def score(lds, shape):
        return None if lds is None else ((np.array(lds) - ld_corrupted) / gap).reshape(shape)

    return Patching(
        tokens=texts(tokenizer, ids_c[0].tolist()),
        corrupted_tokens=texts(tokenizer, ids_x[0].tolist()),
        position=pos,
        target=named(tokenizer, t),
        baseline=None if b is None else named(tokenizer, b),
        clean=ld_clean,
        corrupted=ld_corrupted,
        heads=score(heads, (n, H)),
        residual=score(res, (n, L)),
        patterns=score(pat, (n, H)),
    )


class Runs:
    """Forward passes of [clean, corrupted × k], each corrupted copy patched in one place."""

    def __init__(self, anatomy: Anatomy, ids_c, ids_x, pos, t, b, batch):
        self.anatomy, self.ids_c, self.ids_x = anatomy, ids_c, ids_x
        self.pos, self.t, self.b, self.batch = pos, t, b, batch

    def lds(self, ids: torch.Tensor) -> list[float]:
        """The logit difference of each sequence of ``ids`` (B, L)."""
        with torch.no_grad():
            out = self.anatomy.base(
                input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False
            )
            logits = self.anatomy.unembed(out[0][:, self.pos]).double()  # (B, vocab)
        ld = logits[:, self.t] - (logits[:, self.b] if self.b is not None else 0.0)
        return ld.tolist()

    def sweep(self, places: list[tuple[int, int]], swap) -> list[float]:
        """LD_patched for each (layer, what) place, ``swap(layer, whats)`` giving the patch of
        one layer's chunk as a context manager."""
        out = []
        for layer in sorted({i for i, _ in places}):
            whats = [w for i, w in places if i == layer]
            for start in range(0, len(whats), self.batch):
                chunk = whats[start : start + self.batch]
                ids = torch.cat([self.ids_c, self.ids_x.expand(len(chunk), -1)])
                with swap(layer, chunk):
                    out += self.lds(ids)[1:]
        return out

    def swap_z(self, layer: int, heads: list[int]):
        """Copy (o_proj's input) z of head heads[k] from sequence 0 into sequence k + 1."""
        d = self.anatomy.d_head

        def hook(module, args, kwargs):
            z = args[0].clone()  # (B, L, H·d_head)
            for k, h in enumerate(heads):
                z[k + 1, :, h * d : (h + 1) * d] = z[0, :, h * d : (h + 1) * d]
            return (z, *args[1:]), kwargs

        return hooked([(self.anatomy.blocks[layer].out_proj, hook, True)])

    def swap_residual(self, layer: int, positions: list[int]):
        """Copy the residual entering ``layer`` at positions[k] from sequence 0 into k + 1."""

        def hook(module, args, kwargs):
            x = hidden_of(args, kwargs).clone()  # (B, L, d_model)
            for k, j in enumerate(positions):
                x[k + 1, j] = x[0, j]
            if args:
                return (x, *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": x}

        return hooked([(self.anatomy.blocks[layer].layer, hook, True)])

    def swap_weights(self, layer: int, heads: list[int]):
        """Copy head heads[k]'s weights from sequence 0 into sequence k + 1 (z recomputed with
        that sequence's own v), through a qkv session's edits."""
        model = self.anatomy.base
        edits = WeightSwap(layer, heads)
        return sessions.Session(model, edits=edits).active()


class WeightSwap:
    """Session edits: at ``layer``, sequence k + 1 takes sequence 0's weights of heads[k]."""

    def __init__(self, layer: int, heads: list[int]):
        self.layer, self.heads = layer, heads

    def apply(self, index: int, p, kept, settings):
        if index != self.layer:
            return kept, settings
        kept = dict(kept)
        w, z = kept["weights"].clone(), kept["z"].clone()  # (B, H, L, S), (B, H, L, d_v)
        sink = kept["sink"].clone() if "sink" in kept else None
        H, G = w.shape[-3], p.v.shape[-3]
        for k, h in enumerate(self.heads):
            g = steps.kv_head(h, H, G)
            w[k + 1, h] = w[0, h]
            z[k + 1, h] = steps.weighted_sum(w[k + 1, h], p.v[k + 1, g]).to(z.dtype)
            if sink is not None:
                sink[k + 1, h] = sink[0, h]
        kept["weights"], kept["z"] = w, z
        if sink is not None:
            kept["sink"] = sink
        return kept, settings
