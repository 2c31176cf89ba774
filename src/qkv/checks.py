"""The one input contract every backend shares: shapes, dtypes, numbers (scale, τ, …) and masks.

``qkv.attention`` validates its arguments here once, whichever backend then runs, so bad input
gets the same error from the traced reference, the blocked kernel and torch. Every error names
what was expected and what came.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, NamedTuple

import numpy as np

from qkv import masks, steps


class Problem(NamedTuple):
    """Checked arguments of one attention call, in one array library and one floating dtype
    (the arrays are NumPy arrays or torch tensors, hence ``Any``)."""

    q: Any  # (..., [H,] L, d_k)
    k: Any  # (..., [G,] S, d_k)
    v: Any  # (..., [G,] S, d_v), or None for the weights alone
    mask: Any = None  # the user's boolean mask (True = may attend), or None
    causal: str | None = None  # None, "bottom-right" or "top-left"
    scale: float = 1.0  # multiplies q·kᵀ
    temperature: float = 1.0  # τ > 0 divides the scaled scores
    softcap: float | None = None  # cap > 0: capped = cap·tanh(tempered / cap)
    bias: Any = None  # added to the (capped) scores, broadcastable to (..., L, S)
    sinks: Any = None  # one sink logit per query head, shaped (H, 1, 1) (or (1, 1))

    def rule(self) -> dict:
        """The checked settings (mask … sinks) as keywords, for a kernel: ``kernel(q, k, v,
        **p.rule())``."""
        return {  # written out: a decoding step calls this per layer
            "mask": self.mask,
            "causal": self.causal,
            "scale": self.scale,
            "temperature": self.temperature,
            "softcap": self.softcap,
            "bias": self.bias,
            "sinks": self.sinks,
        }


def problem(
    q,
    k,
    v,
    *,
    mask=None,
    causal=False,
    scale=None,
    temperature=1.0,
    softcap=None,
    bias=None,
    sinks=None,
) -> Problem:
    """Every argument of ``qkv.attention`` checked and converted; see ``Problem``. Its keywords
    are the settings every attention call takes (``takes_settings``)."""
    xp = steps.namespace(q, k, v)
    q, k, v = inputs(xp, q, k, v)
    return Problem(
        q,
        k,
        v,
        checked_mask(mask, q, k),
        masks.causal_align(causal),
        scale_factor(scale, q.shape[-1]),
        temperature_value(temperature),
        softcap_value(softcap),
        checked_bias(bias, q, k),
        checked_sinks(sinks, q),
    )


def takes_settings(fn):
    """``fn(..., **settings)`` takes ``problem``'s keywords (mask, causal, scale, temperature,
    softcap, bias, sinks) and shows them as its own (``help``, ``inspect.signature``); any
    other keyword is refused with fn's name."""
    names = [p for p in inspect.signature(problem).parameters.values() if p.kind is p.KEYWORD_ONLY]
    allowed = {p.name for p in names}
    own = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        for name in kwargs:
            if name not in allowed and name not in own.parameters:
                raise TypeError(f"{fn.__qualname__}() got an unexpected keyword argument {name!r}")
        return fn(*args, **kwargs)

    kept = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
    call.__signature__ = own.replace(parameters=kept + names)  # type: ignore[attr-defined]
    return call


def as_floating(x, xp=None):
    """x as a real floating array: integers and booleans become float64; complex is refused."""
    if type(x) is np.ndarray and x.dtype.kind == "f":  # NumPy floats: no array-API lookup
        return x
    if getattr(x.dtype, "is_floating_point", False) is True:  # torch's real floating dtypes
        return x
    xp = xp or steps.namespace(x)
    if xp.isdtype(x.dtype, "real floating"):
        return x
    if xp.isdtype(x.dtype, ("integral", "bool")):
        return xp.astype(x, xp.float64)
    raise TypeError(f"expected a real-valued array, got dtype {x.dtype}")


def inputs(xp, q, k, v):
    """q, k (and v unless None) as one floating dtype, their shapes checked against each other."""
    names = ("q", "k", "v") if v is not None else ("q", "k")
    arrays = [as_floating(a, xp) for a in (q, k, v) if a is not None]
    for name, a in zip(names, arrays, strict=False):
        if a.ndim < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., length, features), "
                f"got shape {tuple(a.shape)}"
            )
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1:  # promoted to one dtype (float16 and float32: float32)
        dtype = xp.result_type(*arrays)
        arrays = [a if a.dtype == dtype else xp.astype(a, dtype) for a in arrays]
    q, k = arrays[0], arrays[1]
    v = arrays[2] if v is not None else None
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension d_k, got q {tuple(q.shape)} "
            f"and k {tuple(k.shape)}"
        )
    if v is not None:
        if k.shape[-2] != v.shape[-2]:
            raise ValueError(
                f"k and v must have the same number of keys S (axis -2), got "
                f"k {tuple(k.shape)} and v {tuple(v.shape)}"
            )
        if k.ndim >= 3 and v.ndim >= 3 and k.shape[-3] != v.shape[-3]:
            raise ValueError(
                f"k and v must have the same number of heads (axis -3), got "
                f"k {tuple(k.shape)} and v {tuple(v.shape)}"
            )
    if q.ndim >= 3 and k.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        if k.shape[-3] == 0 or q.shape[-3] % k.shape[-3]:
            raise ValueError(
                f"q's heads (axis -3) must be a multiple of k's heads, got "
                f"q {tuple(q.shape)} and k {tuple(k.shape)}"
            )
    scores_shape(q, k)  # the leading axes must broadcast
    return q, k, v


def scores_shape(q, k) -> tuple:
    """The shape of q·kᵀ, (..., [H,] L, S), with grouped K/V heads counted as query heads."""
    q_lead, k_lead = tuple(q.shape[:-2]), tuple(k.shape[:-2])
    if q_lead != k_lead and steps.kv_groups(q, k) > 1:
        k_lead = k_lead[:-1] + (q.shape[-3],)
    lead = q_lead
    if q_lead != k_lead:  # equal leading axes (the common case) need no broadcasting rules
        try:
            lead = np.broadcast_shapes(q_lead, k_lead)
        except ValueError:
            raise ValueError(
                f"the leading axes of q and k do not broadcast: q {tuple(q.shape)}, "
                f"k {tuple(k.shape)}"
            ) from None
    return (*lead, q.shape[-2], k.shape[-2])


def checked_mask(mask, q, k):
    """The user's mask, checked (boolean, broadcasts to the scores), on q's device; or None."""
    if mask is None:
        return None
    if not hasattr(mask, "dtype"):
        mask = np.asarray(mask)
    if str(mask.dtype) not in ("bool", "torch.bool"):
        raise TypeError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
            "float masks are not accepted"
        )
    _broadcasts_to_scores("mask", mask, q, k)
    return steps.to_device_of(mask, q)


def _broadcasts_to_scores(name: str, a, q, k) -> None:
    """``a`` (a mask or a bias) must broadcast to the scores' shape (..., L, S)."""
    target = scores_shape(q, k)
    try:
        ok = np.broadcast_shapes(tuple(a.shape), target) == target
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name} must broadcast to the scores' shape (..., L, S) = {target}, "
            f"got shape {tuple(a.shape)}"
        )


def effective_mask(p: Problem):
    """The user's mask AND the causal mask, in q's array library; None when nothing is masked."""
    mask = p.mask
    if p.causal is not None:
        L, S = p.q.shape[-2], p.k.shape[-2]
        tri = steps.to_device_of(masks.causal(L, S, p.causal), p.q)  # (L, S)
        mask = tri if mask is None else steps.namespace(p.q).logical_and(mask, tri)
    return mask


def at_least_float32(xp, a):
    """a in float32 when it is float16/bfloat16 (scores, softmax and sums never run below
    float32), else a itself."""
    return xp.astype(a, xp.float32) if xp.finfo(a.dtype).bits < 32 else a


def no_overflow(p: Problem, kept: dict, mask) -> None:
    """Refuse scores that overflowed: a row of ``kept["weights"]`` is NaN (its max score is +inf
    or NaN, or every score it sees is −inf) although its q and every key it sees are finite.

    ``kept``: the reference's steps. A finite z (or weights) — the common case — ends the check
    at once; a NaN that comes from a NaN or ±inf input stays in the result, as documented.
    """
    weights = kept["weights"]
    xp = steps.namespace(weights)
    if bool(xp.all(xp.isfinite(kept.get("z", weights)))):
        return
    undefined = xp.any(xp.isnan(weights), axis=-1)  # (..., L): no defined softmax
    q_ok = xp.all(xp.isfinite(p.q), axis=-1)  # (..., L)
    k_bad = xp.astype(~xp.all(xp.isfinite(p.k), axis=-1, keepdims=True), weights.dtype)
    # (..., L, 1) @ (..., 1, S) -> (..., L, S): 1 where the key's k holds a NaN or ±inf
    k_bad = steps.scores(xp.ones_like(weights[..., :1]), k_bad)
    if mask is not None:
        k_bad = xp.where(mask, k_bad, 0.0)
    if not bool(xp.any(undefined & q_ok & ~xp.any(k_bad > 0, axis=-1))):
        return
    scaled, tempered, tau = kept["scaled"], kept["tempered"], p.temperature
    by_tau = xp.isinf(tempered) & xp.isfinite(scaled)  # finite until divided by τ
    if bool(xp.any(by_tau)):
        largest = float(xp.max(xp.abs(xp.where(by_tau, scaled, 0.0))))
        limit = largest / float(xp.finfo(tempered.dtype).max)
        raise ValueError(
            f"temperature {tau:g} is too small for these scores: scaled ÷ τ "
            f"overflows {tempered.dtype} (largest |scaled| = {largest:g}); "
            f"use τ ≥ {limit:.3g}"
        )
    raise ValueError(
        f"the scores overflow {weights.dtype}: q·kᵀ·scale/τ is ±inf or NaN for a key that a "
        f"query sees although q and k are finite (largest |q| {_largest(xp, p.q):.3g}, "
        f"largest |k| {_largest(xp, p.k):.3g}, scale {p.scale:g}, τ {tau:g}); "
        "use float64 inputs, a smaller scale or a larger τ"
    )


def _largest(xp, a) -> float:
    return float(xp.max(xp.abs(a))) if a.size else 0.0


def number(
    x, name: str = "value", *, above: float | None = None, at_least: float | None = None,
    hint: str = "",
) -> float:  # fmt: skip
    """``x`` as a float: a real number (not a bool), finite, > ``above`` and ≥ ``at_least``
    where given. Otherwise a TypeError (not a number) or a ValueError (not finite, or out of
    range): "{name} must be a finite number > 0{hint}, got …". Every scalar of the API and of
    the surfaces is checked here."""
    if type(x) is float and math.isfinite(x):  # the common case first (a call per layer)
        if (above is None or x > above) and (at_least is None or x >= at_least):
            return x

    def rule() -> str:
        bounds = "".join(
            f" {op} {b:g}" for op, b in ((">", above), ("≥", at_least)) if b is not None
        )
        return f"{name} must be a finite number{bounds}{hint}"

    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)):
        raise TypeError(f"{rule()}, got {_quoted(x)}")
    try:
        value = float(x)
    except OverflowError:  # an integer past float64's range
        raise ValueError(f"{rule()}, got an integer of {len(str(abs(x)))} digits") from None
    if not math.isfinite(value) or (above is not None and not value > above):
        raise ValueError(f"{rule()}, got {x}")
    if at_least is not None and not value >= at_least:
        raise ValueError(f"{rule()}, got {x}")
    return value


def _quoted(x) -> str:
    text = repr(x)
    return text if len(text) <= 80 else f"{text[:80]}… ({type(x).__name__})"


def scale_factor(scale, d_k: int) -> float:
    """The factor that multiplies q·kᵀ: 1/√d_k by default, ``scale`` when given."""
    if scale is None:
        return 1.0 / math.sqrt(d_k) if d_k > 0 else 1.0
    return number(scale, "scale", hint=" (1/√d_k by default; 1.0 turns scaling off)")


def temperature_value(tau, name: str = "temperature") -> float:
    """τ, which divides the scaled scores, as a float: finite and > 0."""
    return number(tau, name, above=0)


def sampling_temperature(tau, name: str = "temperature") -> float:
    """The temperature of sampling from logits as a float: finite and ≥ 0 (0 = greedy)."""
    return number(tau, name, at_least=0, hint=" (0 = greedy)")


def positive_int(name: str, n) -> int:
    """A size that must be a positive integer (heads, model width, context ...)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise ValueError(f"{name} must be a positive integer, got {_quoted(n)}")
    return int(n)


def softcap_value(cap, name: str = "softcap") -> float | None:
    """The soft-capping bound as a float, checked finite and > 0; None turns capping off."""
    return None if cap is None else number(cap, name, above=0, hint=" (or None: no capping)")


def checked_bias(bias, q, k):
    """An additive bias (real floating, broadcasts to the scores) in q's library, dtype and
    device; or None."""
    if bias is None:
        return None
    bias = _beside(bias, q)
    xp = steps.namespace(q)
    if not xp.isdtype(bias.dtype, "real floating"):
        raise TypeError(
            f"bias must be a real floating array added to the scores, got dtype "
            f"{bias.dtype}; a boolean goes in mask="
        )
    _broadcasts_to_scores("bias", bias, q, k)
    return xp.astype(bias, q.dtype) if bias.dtype != q.dtype else bias


def checked_sinks(sinks, q):
    """Sink logits, one per query head (shape (H,), H = q's axis -3; shape (1,) or a number
    when q has no head axis), reshaped to (H, 1, 1) to broadcast over queries; or None."""
    if sinks is None:
        return None
    sinks = _beside(sinks, q)
    xp = steps.namespace(q)
    if not xp.isdtype(sinks.dtype, ("real floating", "integral")):
        raise TypeError(f"sinks must be real numbers (one logit per head), got dtype {sinks.dtype}")
    heads = q.shape[-3] if q.ndim >= 3 else 1
    if sinks.ndim > 1 or sinks.ndim == 1 and sinks.shape[0] != heads:
        raise ValueError(
            f"sinks must hold one logit per query head, shape ({heads},), for q of "
            f"shape {tuple(q.shape)}; got shape {tuple(sinks.shape)}"
        )
    sinks = xp.astype(sinks, q.dtype)
    return xp.reshape(sinks, (heads, 1, 1) if sinks.ndim == 1 and q.ndim >= 3 else (1, 1))


def _beside(a, q):
    """``a`` in q's array library and on q's device (a torch tensor keeps its autograd graph)."""
    if hasattr(a, "to") and hasattr(q, "device") and hasattr(a, "device"):
        return a.to(q.device)
    return steps.to_device_of(a, q)
