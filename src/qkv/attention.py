"""Scaled dot-product attention, composed from the steps in ``ops``.

    Attention(Q, K, V) = softmax(mask(Q·Kᵀ · scale) / τ) · V,   scale = 1/√d_k by default
"""

from __future__ import annotations

import math

import numpy as np

from qkv import masks, ops
from qkv.trace import Trace


def attention(q, k, v, *, mask=None, causal=False, scale=None, temperature=1.0,
              return_trace=False, backend="auto"):
    """Scaled dot-product attention.

    z = softmax(mask(q·kᵀ · scale) / τ) · v

    q (..., L, d_k), k (..., S, d_k), v (..., S, d_v) -> (..., L, d_v). Axis -3, when present,
    holds heads; k and v may have fewer heads than q when the count divides (grouped-query
    attention: each K/V head serves a group of query heads).

    mask: boolean, True = may attend, broadcastable to (..., L, S).
    causal: True (or "bottom-right"): query i sees keys j <= i + (S - L); "top-left": j <= i.
    scale: multiplies the scores; default 1/√d_k; ``scale=1.0`` turns scaling off.
    temperature: τ > 0 divides the scaled scores (τ < 1 sharpens, τ > 1 flattens).
    A query whose keys are all masked gets weights 0 and output 0.
    Returns ``out``, or ``(out, trace)`` with ``return_trace=True``.

    backend: "reference" runs every step above and keeps them (the traced path); "blocked" is
    the same result by blocked online softmax in NumPy, never holding the (L, S) scores
    (``qkv.fast``); "torch" calls torch's ``scaled_dot_product_attention``; "auto" (default)
    takes the reference for ``return_trace=True`` or small inputs, torch for torch tensors and
    blocked otherwise (``qkv.backends``).
    """
    if backend != "reference":
        from qkv import backends  # late import: backends builds on this module

        name = backends.choose(backend, q, k, v, return_trace=return_trace)
        if name != "reference":
            return backends.run(name, q, k, v, mask=mask, causal=causal, scale=scale,
                                temperature=temperature)
    steps, settings = _steps(q, k, v, mask=mask, causal=causal, scale=scale,
                             temperature=temperature)
    steps["out"] = steps["z"]
    if return_trace:
        return steps["out"], Trace(steps, settings)
    return steps["out"]


def attention_weights(q, k, *, mask=None, causal=False, scale=None, temperature=1.0):
    """The attention weights alone: softmax(mask(q·kᵀ · scale) / τ), shape (..., L, S).

    Same arguments and conventions as ``attention``; each row sums to 1 (0 if fully masked).
    """
    steps, _ = _steps(q, k, None, mask=mask, causal=causal, scale=scale, temperature=temperature)
    return steps["weights"]


def _steps(q, k, v, *, mask, causal, scale, temperature):
    """Run the steps scores → weights (→ z when v is given); return (steps, settings)."""
    xp = ops.namespace(q, k, v)
    q, k, v = _checked_inputs(xp, q, k, v)
    L, S, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    factor = _scale_factor(scale, d_k)
    tau = _temperature(temperature)
    align = masks.causal_align(causal)
    full_mask = _effective_mask(xp, mask, align, q, k)

    steps = {"q": q, "k": k}
    if v is not None:
        steps["v"] = v
    steps["scores"] = ops.scores(q, k)  # (..., L, S)
    steps["scaled"] = ops.scale(steps["scores"], factor)
    steps["tempered"] = ops.temper(steps["scaled"], tau)
    if tau < 1:
        _check_no_overflow(xp, steps["scaled"], steps["tempered"], tau)
    steps["masked"] = ops.apply_mask(steps["tempered"], full_mask)
    steps["weights"] = ops.softmax(steps["masked"], full_mask)
    if v is not None:
        steps["z"] = ops.weighted_sum(steps["weights"], v, full_mask)  # (..., L, d_v)
    heads = q.shape[-3] if q.ndim >= 3 else None
    settings = {
        "scale": factor, "temperature": tau, "causal": align, "mask": full_mask,
        "L": L, "S": S, "d_k": d_k, "d_v": None if v is None else v.shape[-1],
        "n_heads": heads, "n_kv_heads": k.shape[-3] if heads else None,
    }
    return steps, settings


def _checked_inputs(xp, q, k, v):
    names = ("q", "k", "v") if v is not None else ("q", "k")
    arrays = [ops.as_floating(a, xp) for a in (q, k, v) if a is not None]
    for name, a in zip(names, arrays):
        if a.ndim < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (..., length, features), "
                             f"got shape {tuple(a.shape)}")
    dtype = xp.result_type(*arrays)
    arrays = [a if a.dtype == dtype else xp.astype(a, dtype) for a in arrays]
    q, k = arrays[0], arrays[1]
    v = arrays[2] if v is not None else None
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_k, got q {tuple(q.shape)} "
                         f"and k {tuple(k.shape)}")
    if v is not None:
        if k.shape[-2] != v.shape[-2]:
            raise ValueError(f"k and v must have the same number of keys S (axis -2), got "
                             f"k {tuple(k.shape)} and v {tuple(v.shape)}")
        if k.ndim >= 3 and v.ndim >= 3 and k.shape[-3] != v.shape[-3]:
            raise ValueError(f"k and v must have the same number of heads (axis -3), got "
                             f"k {tuple(k.shape)} and v {tuple(v.shape)}")
    if q.ndim >= 3 and k.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        if k.shape[-3] == 0 or q.shape[-3] % k.shape[-3]:
            raise ValueError(f"q's heads (axis -3) must be a multiple of k's heads, got "
                             f"q {tuple(q.shape)} and k {tuple(k.shape)}")
    return q, k, v


def _scores_shape(q, k) -> tuple:
    k_lead = tuple(k.shape[:-2])
    if ops.kv_groups(q, k) > 1:
        k_lead = k_lead[:-1] + (q.shape[-3],)
    try:
        lead = np.broadcast_shapes(tuple(q.shape[:-2]), k_lead)
    except ValueError:
        raise ValueError(f"the leading axes of q and k do not broadcast: q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}") from None
    return (*lead, q.shape[-2], k.shape[-2])


def _effective_mask(xp, mask, align, q, k):
    """The user's mask AND the causal mask, in q's array library; None when nothing is masked."""
    L, S = q.shape[-2], k.shape[-2]
    mask = _checked_mask(mask, q, k)
    if align is not None:
        tri = ops.to_device_of(masks.causal(L, S, align), q)  # (L, S)
        mask = tri if mask is None else xp.logical_and(mask, tri)
    return mask


def _checked_mask(mask, q, k):
    """The user's mask, checked (boolean, broadcasts to the scores), on q's device; or None."""
    if mask is not None:
        if not hasattr(mask, "dtype"):
            mask = np.asarray(mask)
        if str(mask.dtype) not in ("bool", "torch.bool"):
            raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
                            "float masks are not accepted")
        target = _scores_shape(q, k)
        try:
            ok = np.broadcast_shapes(tuple(mask.shape), target) == target
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"mask must broadcast to the scores' shape (..., L, S) = {target}, "
                             f"got shape {tuple(mask.shape)}")
        mask = ops.to_device_of(mask, q)
    return mask


def _check_no_overflow(xp, scaled, tempered, tau: float) -> None:
    """A τ so small that finite scaled scores become ±inf would lose which key wins."""
    overflow = xp.isinf(tempered) & xp.isfinite(scaled)
    if bool(xp.any(overflow)):
        largest = float(xp.max(xp.abs(xp.where(overflow, scaled, 0.0))))
        limit = largest / float(xp.finfo(tempered.dtype).max)
        raise ValueError(f"temperature {tau:g} is too small for these scores: scaled ÷ τ "
                         f"overflows {tempered.dtype} (largest |scaled| = {largest:g}); "
                         f"use τ ≥ {limit:.3g}")


def _scale_factor(scale, d_k: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d_k) if d_k > 0 else 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)):
        raise TypeError(f"scale must be a number (1/√d_k by default; 1.0 turns scaling off), "
                        f"got {scale!r}")
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")
    return float(scale)


def _temperature(tau) -> float:
    if isinstance(tau, bool) or not isinstance(tau, (int, float, np.floating, np.integer)):
        raise TypeError(f"temperature must be a number τ > 0, got {tau!r}")
    if not (math.isfinite(tau) and tau > 0):
        raise ValueError(f"temperature must be finite and > 0, got {tau}")
    return float(tau)
