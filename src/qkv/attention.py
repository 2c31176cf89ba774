"""Scaled dot-product attention, composed from the steps in ``qkv.steps``.

    Attention(Q, K, V) = softmax(mask(Q·Kᵀ · scale / τ)) · V,   scale = 1/√d_k by default

One call: ``checks.problem`` validates the arguments (the contract every backend shares), then
``kernels.dispatch.compute`` runs a kernel, or the reference's steps (``qkv.reference``) one by
one, which a trace keeps.
"""

from __future__ import annotations

from qkv import checks
from qkv.kernels import dispatch
from qkv.reference import traced_steps
from qkv.trace import Trace

__all__ = ["attention", "attention_weights", "traced_steps"]


@checks.takes_settings
def attention(q, k, v, *, return_trace=False, backend="auto", **settings):
    """Scaled dot-product attention.

    z = softmax(mask(q·kᵀ · scale / τ)) · v

    q (..., L, d_k), k (..., S, d_k), v (..., S, d_v) -> (..., L, d_v). Axis -3, when present,
    holds heads; k and v may have fewer heads than q when the count divides (grouped-query
    attention: each K/V head serves a group of query heads).

    mask: boolean, True = may attend, broadcastable to (..., L, S).
    causal: True (or "bottom-right"): query i sees keys j <= i + (S - L); "top-left": j <= i.
    scale: multiplies the scores; default 1/√d_k; ``scale=1.0`` turns scaling off.
    temperature: τ > 0 divides the scaled scores (τ < 1 sharpens, τ > 1 flattens).
    A query whose keys are all masked gets weights 0 and output 0.
    softcap: cap > 0 squashes the tempered scores, capped = cap·tanh(tempered / cap) (Gemma 2).
    bias: a floating array added before masking, broadcastable to (..., L, S) (relative position
    bias, ALiBi).
    sinks: one logit per query head, shape (H,), that joins each row's softmax, takes weight and
    adds no value (GPT-OSS): weights_j = e^s_j / (e^sink + Σ_k e^s_k); the trace keeps the
    sink's weight as step "sink" (..., L, 1). Order: tempered → capped → biased → masked.
    Every backend computes these three with the same numbers, except that torch's SDPA cannot
    soft-cap: ``softcap`` with torch inputs, or with backend="torch", runs the reference
    (in torch, with autograd), never an error.
    Returns ``out``, or ``(out, trace)`` with ``return_trace=True``.

    backend: "reference" runs every step above and keeps them (the traced path); "blocked" is
    the same result by blocked online softmax in NumPy, never holding the (L, S) scores
    (``qkv.kernels.blocked``); "torch" calls torch's ``scaled_dot_product_attention``; "auto" (default)
    takes the reference for ``return_trace=True`` or small inputs, torch for torch tensors and
    the fused (numba) or blocked kernel otherwise (``qkv.kernels.dispatch``).
    """
    p = checks.problem(q, k, v, **settings)
    z, kept = dispatch.compute(p, backend, return_trace=return_trace)
    if not return_trace:
        return z
    kept_steps, kept_settings = kept
    return z, Trace({**kept_steps, "out": z}, kept_settings)


@checks.takes_settings
def attention_weights(q, k, **settings):
    """The attention weights alone: softmax(mask(q·kᵀ · scale / τ)), shape (..., L, S).

    Same arguments and conventions as ``attention``; each row sums to 1 (0 if fully masked).
    """
    return traced_steps(checks.problem(q, k, None, **settings))[0]["weights"]
