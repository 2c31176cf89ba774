"""Edit named attention steps of a transformers model while it runs, and see what changes.

    >>> with qkv.hf.intervene(model, {"3.4": {"ablate": "zero"}, (5, 1): {"tau": 0.5}}):
    ...     logits = model(**inputs).logits
    >>> qkv.hf.compare(model, inputs, {"3.4": {"ablate": "zero"}}).kl

Keys name a layer and head: "L.H" or (L, H); "L" or (L, None) means every head of layer L.
Layers are indices into ``qkv.hf.attention_layers(model)``. Each value holds one or more of

    tau: τ > 0          that head's tempered = scaled / τ (recomputed by qkv's engine)
    knockout: j         key position j is masked for that head (every query)
    pin: "uniform" | w  the head's weights replaced: uniform over the keys its mask allows, or
                        an array broadcastable to (L, S); z = weights·v follows
    ablate: "zero" | "mean"   the head's z set to 0, or to its mean over the batch
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch

from qkv import checks, steps
from qkv.hf import session as sessions
from qkv.hf.tokens import texts
from qkv.reference import traced_steps

_KEYS = ("tau", "knockout", "pin", "ablate")


@dataclass(frozen=True)
class Edit:
    """One layer's (and head's, None = every head) change to its attention steps."""

    layer: int
    head: int | None
    tau: float | None = None
    knockout: int | None = None
    pin: object = None
    ablate: str | None = None

    def describe(self) -> str:
        where = f"layer {self.layer}" + ("" if self.head is None else f" head {self.head}")
        parts = [
            f"τ = {self.tau:g}" if self.tau is not None else "",
            f"key {self.knockout} knocked out" if self.knockout is not None else "",
            "weights pinned " + (self.pin if isinstance(self.pin, str) else "to a pattern")
            if self.pin is not None
            else "",
            f"{self.ablate}-ablated" if self.ablate else "",
        ]
        return f"{where}: " + ", ".join(p for p in parts if p)


def _where(key) -> tuple[int, int | None]:
    if isinstance(key, str):
        layer, _, head = key.partition(".")
        try:
            return int(layer), (int(head) if head else None)
        except ValueError:
            raise ValueError(
                f"an edit's key must be 'LAYER' or 'LAYER.HEAD' (like '3.4'), got {key!r}"
            ) from None
    if isinstance(key, int) and not isinstance(key, bool):
        return key, None
    if isinstance(key, tuple) and len(key) == 2:
        return int(key[0]), None if key[1] is None else int(key[1])
    raise ValueError(f"an edit's key must be 'LAYER.HEAD', (layer, head) or a layer, got {key!r}")


def parse(spec: dict) -> list[Edit]:
    """``{key: {tau|knockout|pin|ablate: value}}`` as checked ``Edit``s."""
    if not isinstance(spec, dict) or not spec:
        raise ValueError(f"edits must be a non-empty dict {{'LAYER.HEAD': {{...}}}}, got {spec!r}")
    edits = []
    for key, change in spec.items():
        layer, head = _where(key)
        if not isinstance(change, dict) or not change or set(change) - set(_KEYS):
            raise ValueError(f"edit {key!r} must be a dict with keys from {_KEYS}, got {change!r}")
        tau = change.get("tau")
        if tau is not None:
            checks.temperature_value(tau)
        if change.get("ablate") not in (None, "zero", "mean"):
            raise ValueError(f"ablate must be 'zero' or 'mean', got {change['ablate']!r}")
        pin = change.get("pin")
        if isinstance(pin, str) and pin != "uniform":
            raise ValueError(f"pin must be 'uniform' or an array of weights, got {pin!r}")
        edits.append(
            Edit(
                layer,
                head,
                tau=None if tau is None else float(tau),
                knockout=change.get("knockout"),
                pin=pin,
                ablate=change.get("ablate"),
            )
        )
    return edits


class Edits:
    """Checked edits, applied by the attention function to the steps of the layers they name."""

    def __init__(self, edits: list[Edit], n_layers: int):
        for e in edits:
            if not 0 <= e.layer < n_layers:
                raise ValueError(f"layer must be in [0, {n_layers}) for this model, got {e.layer}")
        self.edits = edits

    def apply(self, index: int, p, kept, settings):
        """This layer's steps with its edits applied, in the order tau/knockout → pin → ablate."""
        mine = [e for e in self.edits if e.layer == index]
        if not mine:
            return kept, settings
        kept = dict(kept)
        H = kept["q"].shape[-3]
        for e in mine:
            heads = range(H) if e.head is None else [_head(e.head, H)]
            for h in heads:
                if e.tau is not None or e.knockout is not None:
                    _recompute(kept, p, h, tau=e.tau, knockout=e.knockout)
                if e.pin is not None:
                    _pin(kept, p, h, e.pin)
                if e.ablate:
                    _ablate(kept, h, e.ablate)
        settings = dict(settings, edits=[e.describe() for e in mine])
        return kept, settings


def _head(h: int, H: int) -> int:
    if not 0 <= h < H:
        raise ValueError(f"head must be in [0, {H}) for this layer, got {h}")
    return h


def _put(a, h: int, part):
    """``a`` with head h (axis -3) replaced by ``part`` (..., 1, L, n); a copy, autograd-safe."""
    return torch.cat([a[..., :h, :, :], part, a[..., h + 1 :, :, :]], dim=-3)


def _one_head(a, h: int):
    """Head h of a per-head array, or a as is when its head axis is shared (size 1)."""
    if a is None or a.ndim < 3 or a.shape[-3] == 1:
        return a
    return a[..., h : h + 1, :, :]


def _recompute(kept, p, h: int, *, tau, knockout):
    """Head h's steps recomputed by the engine with its own τ and/or a key masked."""
    G = p.k.shape[-3]
    g = steps.kv_head(h, p.q.shape[-3], G)
    mask = checks.effective_mask(p)
    S = p.k.shape[-2]
    if knockout is not None:
        if not -S <= knockout < S:
            raise ValueError(f"knockout key must be in [0, {S}), got {knockout}")
        keep = torch.arange(S, device=p.q.device) != knockout % S  # (S,)
        mask = keep if mask is None else mask & keep
    one = p._replace(
        q=p.q[..., h : h + 1, :, :],
        k=p.k[..., g : g + 1, :, :],
        v=p.v[..., g : g + 1, :, :],
        mask=_one_head(mask, h),
        causal=None,
        temperature=p.temperature if tau is None else tau,
        bias=_one_head(p.bias, h),
        sinks=_one_head(p.sinks, h),
    )
    part, _ = traced_steps(one)
    for name, a in part.items():
        if name not in ("k", "v") and name in kept:
            kept[name] = _put(kept[name], h, a)


def _pin(kept, p, h: int, pin):
    w = kept["weights"]
    mask = checks.effective_mask(p)
    allowed = _one_head(mask, h)
    shape = (*w.shape[:-3], 1, *w.shape[-2:])  # (..., 1, L, S)
    if isinstance(pin, str):  # uniform over the keys the mask allows
        ones = torch.ones(shape, dtype=w.dtype, device=w.device)
        if allowed is not None:
            ones = ones * allowed
        count = ones.sum(-1, keepdim=True)
        new = torch.where(count > 0, ones / count.clamp(min=1), 0.0)
    else:
        new = torch.as_tensor(pin, dtype=w.dtype, device=w.device)
        try:
            new = torch.broadcast_to(new, shape)
        except RuntimeError:
            raise ValueError(
                f"a pinned pattern must broadcast to (L, S) = "
                f"{tuple(w.shape[-2:])}, got shape {tuple(new.shape)}"
            ) from None
    kept["weights"] = _put(w, h, new)
    g = steps.kv_head(h, p.q.shape[-3], p.k.shape[-3])
    z = steps.weighted_sum(new, p.v[..., g : g + 1, :, :])  # (..., 1, L, d_v)
    kept["z"] = _put(kept["z"], h, z)
    if "sink" in kept:  # a pinned row gives the sink nothing
        kept["sink"] = _put(kept["sink"], h, torch.zeros_like(kept["sink"][..., :1, :, :]))


def _ablate(kept, h: int, how: str):
    z = kept["z"][..., h : h + 1, :, :]  # (B, 1, L, d_v)
    new = torch.zeros_like(z) if how == "zero" else z.mean(dim=0, keepdim=True).expand_as(z)
    kept["z"] = _put(kept["z"], h, new)


@contextlib.contextmanager
def intervene(model, spec: dict):
    """Apply ``spec``'s edits to every forward pass of ``model`` inside the ``with`` block;
    yields the checked ``Edits``. The model must use ``attn_implementation="qkv"``."""
    sessions.check_uses_qkv(model)
    edits = Edits(parse(spec), len(sessions.attention_layers(model)))
    session = sessions.joined(model, edits=edits)
    with session.active():
        yield edits


@dataclass
class NextToken:
    """The next-token distribution before and after the edits, at one position."""

    before: list[tuple[str, float]]  # top-k (token's text, probability)
    after: list[tuple[str, float]]
    kl: float  # KL(before ‖ after) in nats
    edits: list[str]


def compare(
    model, inputs: dict, spec: dict, *, tokenizer=None, top_k: int = 5, sequence: int = 0
) -> NextToken:
    """Run ``inputs`` without and with the edits; report the next-token distribution of
    ``sequence``'s last real position: top-k of each and KL(before ‖ after)."""
    edits = parse(spec)
    with torch.no_grad():
        before = model(**inputs).logits
        with intervene(model, spec):
            after = model(**inputs).logits
    mask = inputs.get("attention_mask")
    last = -1 if mask is None else int(torch.nonzero(mask[sequence])[-1])
    p = torch.log_softmax(before[sequence, last].double(), -1)
    q = torch.log_softmax(after[sequence, last].double(), -1)
    kl = float(torch.sum(p.exp() * (p - q)))
    return NextToken(
        _top(p, top_k, tokenizer),
        _top(q, top_k, tokenizer),
        max(kl, 0.0),
        [e.describe() for e in edits],
    )


def _top(logp, k: int, tokenizer) -> list[tuple[str, float]]:
    values, ids = torch.topk(logp, min(k, logp.shape[-1]))
    labels = texts(tokenizer, ids.tolist())
    return [(str(t), math.exp(float(v))) for t, v in zip(labels, values, strict=False)]
