"""The reference: every step of attention run one by one on checked inputs and kept, as a
trace holds them. Each kernel computes the same ``z`` without keeping the steps; where a kernel
cannot vouch for its answer, these steps decide it (``kernels.dispatch.compute``)."""

from __future__ import annotations

from qkv import checks, steps
from qkv.trace import to_numpy


def traced_steps(p: checks.Problem):
    """Run the steps scores → weights (→ z when p.v is given) on checked inputs; return
    (steps by name, settings) as a ``Trace`` holds them."""
    xp = steps.namespace(p.q, p.k, p.v)
    q, k, v, tau = p.q, p.k, p.v, p.temperature
    full_mask = checks.effective_mask(p)
    kept = {"q": q, "k": k}
    if v is not None:
        kept["v"] = v
    q, k = checks.at_least_float32(xp, q), checks.at_least_float32(xp, k)
    v = None if v is None else checks.at_least_float32(xp, v)
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
