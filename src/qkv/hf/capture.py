"""One forward pass that keeps, at one position, what each part of the model adds to the residual.

Forward hooks on the modules ``qkv.hf.anatomy`` names copy a (d_model,) vector per module (the
(n_heads·d_head,) o_proj input for z) at the chosen position of sequence 0, and nothing else:
memory grows with layers × d_model, never with the prompt's length squared.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from qkv.hf.anatomy import EXPECTED, Anatomy


@dataclass
class Captured:
    """Vectors at one position, per layer: ``z`` (o_proj's input), ``attn`` (the attention
    module's output), ``attn_added`` / ``mlp_added`` (what the layer adds to the residual) and
    ``resid`` (the layer's output); ``embed`` (the residual entering layer 0), ``final_in`` /
    ``final_out`` (the final norm's input and output)."""

    embed: torch.Tensor | None = None
    z: dict[int, torch.Tensor] = field(default_factory=dict)
    out: dict[int, torch.Tensor] = field(default_factory=dict)
    attn: dict[int, torch.Tensor] = field(default_factory=dict)
    attn_added: dict[int, torch.Tensor] = field(default_factory=dict)
    mlp_added: dict[int, torch.Tensor] = field(default_factory=dict)
    resid: dict[int, torch.Tensor] = field(default_factory=dict)
    final_in: torch.Tensor | None = None
    final_out: torch.Tensor | None = None


def hidden_of(args, kwargs):
    """The hidden states a module is called with (first positional, or ``hidden_states=``)."""
    return args[0] if args else kwargs.get("hidden_states")


def _first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


def capture(anatomy: Anatomy, ids: torch.Tensor, pos: int, *, session=None) -> Captured:
    """Run ``ids`` (1, L) through ``anatomy.base`` (inside ``session.active()`` when given) and
    keep the vectors of ``Captured`` at position ``pos``."""
    got = Captured()

    def at(t: torch.Tensor) -> torch.Tensor:
        return t[0, pos].detach().clone()  # (B, L, n) -> (n,)

    def keep(store, index, *, of_input=False):
        if of_input:
            return lambda m, args, kwargs: store.__setitem__(index, at(hidden_of(args, kwargs)))
        return lambda m, args, kwargs, out: store.__setitem__(index, at(_first(out)))

    def first_layer(m, args, kwargs):
        got.embed = at(hidden_of(args, kwargs))

    def final(m, args, kwargs, out):
        got.final_in, got.final_out = at(hidden_of(args, kwargs)), at(_first(out))

    hooks = [(anatomy.blocks[0].layer, first_layer, True), (anatomy.final_norm, final, False)]
    for i, b in enumerate(anatomy.blocks):
        hooks += [
            (b.out_proj, keep(got.z, i, of_input=True), True),
            (b.out_proj, keep(got.out, i), False),
            (b.attention, keep(got.attn, i), False),
            (b.attn_after or b.attention, keep(got.attn_added, i), False),
            (b.mlp_after or b.mlp, keep(got.mlp_added, i), False),
            (b.layer, keep(got.resid, i), False),
        ]
    with hooked(hooks), torch.no_grad(), session.active() if session else contextlib.nullcontext():
        anatomy.base(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    n = anatomy.n_layers
    if (
        got.embed is None
        or got.final_in is None
        or any(len(d) != n for d in (got.z, got.mlp_added, got.resid))
    ):
        raise ValueError(f"{EXPECTED}; {anatomy.name} did not run each of its parts once")
    return got


@contextlib.contextmanager
def hooked(hooks):
    """Register (module, hook, before) forward hooks (before: a pre-hook), all with kwargs;
    remove them when the block ends."""
    handles = []
    try:
        for module, hook, before in hooks:
            register = module.register_forward_pre_hook if before else module.register_forward_hook
            handles.append(register(hook, with_kwargs=True))
        yield
    finally:
        for h in handles:
            h.remove()


def closes(anatomy: Anatomy, got: Captured) -> None:
    """Check that the parts add up to the final residual, and that each attention module's
    output is its o_proj's; a ValueError naming the model otherwise."""
    assert got.embed is not None and got.final_in is not None  # capture() made sure
    for i in range(anatomy.n_layers):
        a, o = got.attn[i].double(), got.out[i].double()
        if not torch.allclose(a, o, rtol=1e-4, atol=1e-4 * float(o.abs().max()) + 1e-7):
            raise ValueError(
                f"{EXPECTED}; {anatomy.name}'s attention output at layer {i} is not its "
                f"o_proj's output (something acts after o_proj)"
            )
    parts = [got.embed] + [got.attn_added[i] for i in range(anatomy.n_layers)]
    parts += [got.mlp_added[i] for i in range(anatomy.n_layers)]
    total = torch.stack([p.double() for p in parts]).sum(0)
    size = sum(float(p.double().norm()) for p in parts)
    eps = torch.finfo(got.final_in.dtype).eps
    gap = float((total - got.final_in.double()).norm())
    if gap > max(1e-3, 8 * eps) * size:
        raise ValueError(
            f"{EXPECTED}; {anatomy.name}'s layers do not add their attention and MLP outputs "
            f"to the residual stream as qkv reads them (the parts miss the final residual by "
            f"{gap:.3g}, relative {gap / size:.2g})"
        )
