"""transformers' attention, computed by qkv's engine: the implementation named "qkv".

transformers looks an attention function up by name (``AttentionInterface``) and builds each
layer's mask with the mask function registered under the same name (``AttentionMaskInterface``).
``register()`` adds both, so

    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="qkv")

runs every attention layer through ``qkv.attention``: grouped K/V heads, padding, causal and
sliding-window masks (built by transformers as boolean masks, True = may attend), scaling,
soft-capping (Gemma 2), attention sinks (GPT-OSS), a position bias (T5), dropout in training
mode and KV caches (transformers hands over the cached keys and values). A keyword this
adapter does not know raises an error naming the model and the keyword: never a silent
approximation.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from qkv import checks, steps
from qkv.hf import session  # the active trace / interventions, if any
from qkv.kernels import dispatch
from qkv.reference import traced_steps

NAME = "qkv"

# Keywords transformers passes to every attention function that leave the math unchanged here:
# positions (RoPE is applied before the call), output switches, and packed-sequence lengths
# (the mask already separates packed sequences, as for sdpa).
IGNORED = frozenset(
    {
        "position_ids",
        "output_attentions",
        "output_hidden_states",
        "output_router_logits",
        "use_cache",
        "cache_position",
        "past_key_values",
        "num_items_in_batch",
        "return_dict",
        "token_type_ids",
        "cu_seq_lens_q",
        "cu_seq_lens_k",
        "max_length_q",
        "max_length_k",
        "seq_idx",
        "layer_idx",
        "sliding_window",  # the sliding window is inside the mask
    }
)


def boolean_mask(*args, **kwargs):
    """The mask function for "qkv": transformers' boolean mask (True = may attend). While a
    trace or an intervention watches the run it is always built, never replaced by a causal
    flag, so the mask qkv applies is the one it shows; otherwise transformers may skip it where
    sdpa does (no padding: a causal flag, or nothing at all for one new token), which spares
    every layer of a generation step a mask."""
    if session.current() is not None:
        kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(*args, **kwargs)


def register() -> None:
    """Register the attention function and its mask function under the name "qkv"."""
    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, boolean_mask)


def model_name(module) -> str:
    config = getattr(module, "config", None)
    kind = getattr(config, "model_type", None) or "model"
    return f"{kind} ({type(module).__name__})"


def check_kwargs(module, kwargs: dict) -> None:
    """Refuse a keyword that is set (not None) and not known to leave the math unchanged."""
    if kwargs.keys() <= IGNORED:  # the common case, checked once per layer call
        return
    unknown = sorted(k for k, v in kwargs.items() if k not in IGNORED and v is not None)
    if unknown:
        raise ValueError(
            f"attn_implementation='qkv' does not support the keyword "
            f"{unknown[0]!r} that {model_name(module)} passes to its attention "
            f"function; it would change the attention, so qkv refuses rather than "
            f"approximate: load the model with attn_implementation='eager'"
        )


def as_boolean_mask(module, mask):
    """transformers' mask as a boolean (True = may attend): boolean masks pass; an additive
    float mask holding only 0 and very negative values (≤ half the dtype's minimum, or −inf)
    converts; any other float mask is a bias, refused by name."""
    if mask is None or mask.dtype == torch.bool:
        return mask
    blocked = mask <= torch.finfo(mask.dtype).min / 2  # (B, 1, L, S)
    if not bool(torch.all(blocked | (mask == 0))):
        raise ValueError(
            f"{model_name(module)} passed a float attention mask with values other "
            f"than 0 and -inf; qkv takes masks as booleans (True = may attend)"
        )
    return ~blocked


def problem(
    module, query, key, value, attention_mask, *, scaling, softcap, sinks, position_bias, is_causal
):
    """The checked ``qkv`` problem for one layer's call (q (B, H, L, d), k and v (B, G, S, d))."""
    mask = as_boolean_mask(module, attention_mask)
    causal = False
    if mask is None:  # no mask built: causal layers still see only the past
        causal_layer = is_causal if is_causal is not None else getattr(module, "is_causal", False)
        causal = bool(causal_layer) and query.shape[-2] > 1
    return checks.problem(
        query,
        key,
        value,
        mask=mask,
        causal=causal,
        scale=scaling,
        softcap=softcap,
        bias=position_bias,
        sinks=sinks,
    )


def attention_forward(
    module,
    query,
    key,
    value,
    attention_mask,
    dropout=0.0,
    scaling=None,
    softcap=None,
    s_aux=None,
    position_bias=None,
    is_causal=None,
    **kwargs,
):
    """transformers' attention signature: q (B, H, L, d), k and v (B, G, S, d) ->
    (output (B, L, H, d_v), weights (B, H, L, S) or None)."""
    check_kwargs(module, kwargs)
    p = problem(
        module,
        query,
        key,
        value,
        attention_mask,
        scaling=scaling,
        softcap=softcap,
        sinks=s_aux,
        position_bias=position_bias,
        is_causal=is_causal,
    )
    active = session.current()
    if active is not None:
        active.see(module, p)
        active = active if active.keeps_steps else None  # only watching: the kernels run it
    dropping = bool(dropout) and module.training
    fast = active is None or active.edits is None  # nothing to edit: a trace records lazily
    if fast and not dropping and not kwargs.get("output_attentions"):
        z, _ = dispatch.compute(p)
        if active is not None:
            active.record(module, p)  # q, k, v and the mask's rule; steps computed when read
        return z.transpose(1, 2).contiguous(), None  # (B, H, L, d_v) -> (B, L, H, d_v)
    kept, settings = traced_steps(p)
    if active is not None:
        kept, settings = active.layer_call(module, p, kept, settings)
    if dropping:
        full_mask = checks.effective_mask(p)
        kept["weights"] = torch.nn.functional.dropout(kept["weights"], p=dropout, training=True)
        kept["z"] = steps.weighted_sum(kept["weights"], p.v, full_mask)  # (B, H, L, d_v)
    return kept["z"].transpose(1, 2).contiguous(), kept["weights"]
