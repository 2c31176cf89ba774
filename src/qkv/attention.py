"""Scaled dot-product attention, composed from the steps in ``qkv.steps``.

    Attention(Q, K, V) = softmax(mask(Q·Kᵀ · scale / τ)) · V,   scale = 1/√d_k by default

One call: ``checks.problem`` validates the arguments (the contract every backend shares), then
``kernels.dispatch`` runs a kernel, or the steps below run one by one and can be kept as a trace.
"""

from __future__ import annotations

from qkv import checks, steps
from qkv.kernels import dispatch
from qkv.trace import Trace, to_numpy


def attention(
    q,
    k,
    v,
    *,
    mask=None,
    causal=False,
    scale=None,
    temperature=1.0,
    return_trace=False,
    backend="auto",
    softcap=None,
    bias=None,
    sinks=None,
):
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
    p = checks.problem(
        q,
        k,
        v,
        mask=mask,
        causal=causal,
        scale=scale,
        temperature=temperature,
        softcap=softcap,
        bias=bias,
        sinks=sinks,
    )
    if backend != "reference":
        name = dispatch.choose(backend, p, return_trace=return_trace)
        out = None if name == "reference" else dispatch.run(name, p)
        if out is not None:
            return out  # else the reference decides: NaN rows or the overflow error
    kept, settings = traced_steps(p)
    kept["out"] = kept["z"]
    if return_trace:
        return kept["out"], Trace(kept, settings)
    return kept["out"]


def attention_weights(
    q,
    k,
    *,
    mask=None,
    causal=False,
    scale=None,
    temperature=1.0,
    softcap=None,
    bias=None,
    sinks=None,
):
    """The attention weights alone: softmax(mask(q·kᵀ · scale / τ)), shape (..., L, S).

    Same arguments and conventions as ``attention``; each row sums to 1 (0 if fully masked).
    """
    p = checks.problem(
        q,
        k,
        None,
        mask=mask,
        causal=causal,
        scale=scale,
        temperature=temperature,
        softcap=softcap,
        bias=bias,
        sinks=sinks,
    )
    return traced_steps(p)[0]["weights"]


def traced_steps(p: checks.Problem):
    """Run the steps scores → weights (→ z when p.v is given) on checked inputs; return
    (steps by name, settings) as a ``Trace`` holds them."""
    xp = steps.namespace(p.q, p.k, p.v)
    q, k, v, tau = p.q, p.k, p.v, p.temperature
    full_mask = checks.effective_mask(p)
    kept = {"q": q, "k": k}
    if v is not None:
        kept["v"] = v
    q, k, v = (None if a is None else checks.at_least_float32(xp, a) for a in (q, k, v))
    kept["scores"] = steps.scores(q, k)  # (..., L, d_k) @ (..., d_k, S) -> (..., L, S)
    kept["scaled"] = steps.scale(kept["scores"], p.scale)
    kept["tempered"] = steps.temper(kept["scaled"], tau)
    last = kept["tempered"]
    if p.softcap is not None:
        last = kept["capped"] = steps.softcap(last, p.softcap)
    if p.bias is not None:
        last = kept["biased"] = steps.add_bias(last, p.bias)  # (..., L, S) + bias
    kept["masked"] = steps.apply_mask(last, full_mask)
    if p.sinks is None:
        kept["weights"] = steps.softmax(kept["masked"], full_mask)
    else:  # (..., L, S), (..., L, 1)
        kept["weights"], kept["sink"] = steps.softmax_with_sink(kept["masked"], p.sinks)
    if v is not None:
        z = steps.weighted_sum(kept["weights"], v, full_mask)  # (..., L, d_v)
        kept["z"] = z if z.dtype == p.q.dtype else xp.astype(z, p.q.dtype)  # the input's dtype
    checks.no_overflow(p, kept, full_mask)
    heads = q.shape[-3] if q.ndim >= 3 else None
    settings = {
        "scale": p.scale,
        "temperature": tau,
        "causal": p.causal,
        "mask": full_mask,
        "L": q.shape[-2],
        "S": k.shape[-2],
        "d_k": q.shape[-1],
        "d_v": None if v is None else v.shape[-1],
        "n_heads": heads,
        "n_kv_heads": k.shape[-3] if heads else None,
    }
    if p.softcap is not None:
        settings["softcap"] = p.softcap
    if p.sinks is not None:  # the logits, one per query head (or one for all): JSON numbers
        settings["sinks"] = [float(x) for x in to_numpy(p.sinks).reshape(-1)]
    return kept, settings
