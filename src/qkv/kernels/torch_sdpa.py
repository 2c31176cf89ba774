"""Attention through torch's ``scaled_dot_product_attention``, with qkv's conventions kept:
bottom-right causal alignment, a boolean mask with True = may attend, and 0 for a query that sees
no key. torch is imported only when this kernel runs.

The optional steps: a bias goes in as SDPA's float ``attn_mask`` (SDPA adds it to the scaled
scores, after τ: the reference's "biased"), −inf where the boolean mask or the causal mask hides
a key. Sinks are one more key per head whose score is the sink logit: its k and v are 0 (q·0 = 0
plus the float mask's column, the logit), so it joins each row's denominator and adds no value;
a row that sees no other key gives the sink all its weight and z = 0. Soft-capping needs a step
between the scores and the mask that SDPA does not have: ``dispatch`` never sends it here.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from qkv import masks, steps
from qkv.checks import Problem
from qkv.kernels.layout import padded
from qkv.steps import head_groups, is_torch_array


def torch_attention(q, k, v, **rule):
    """Attention through ``torch.nn.functional.scaled_dot_product_attention``.

    Inputs as ``blocked_attention`` takes them, as torch tensors (NumPy arrays are wrapped
    without a copy and the result comes back as NumPy). Inputs become 4-D (batch, heads, L, d)
    so torch uses its fused kernel; grouped K/V heads use ``enable_gqa``; the causal mask is
    torch's ``is_causal`` where the alignments agree (top-left, or L = S) and a boolean mask
    otherwise; rows that see no key are set to 0 (torch would give NaN). float16/bfloat16 run
    in float32 and come back in their dtype. bias (broadcastable to (..., H, L, S)) and sinks
    ((H, 1, 1) or (1, 1)) as the module docstring says; softcap must be None. Returns None when
    a row that sees keys comes out 0 everywhere without sinks (SDPA gives 0 when every score a
    row sees is −inf, which the reference decides: NaN, or the overflow error) and when a value
    is not finite.
    """
    torch, F = _torch()
    _, _, _, mask, causal, scale, temperature, softcap, bias, sinks = Problem(q, k, v, **rule)
    if softcap is not None:
        raise ValueError(
            "torch's scaled_dot_product_attention cannot soft-cap the scores; "
            "qkv.attention runs the reference for softcap with torch inputs"
        )
    numpy_in = not is_torch_array(q)
    if numpy_in:  # torch refuses negative strides: those arrays are copied
        q, k, v, mask, bias, sinks = (
            None
            if a is None
            else torch.as_tensor(a if min(a.strides, default=0) >= 0 else a.copy())
            for a in (q, k, v, mask, bias, sinks)
        )
    dtype = q.dtype
    if dtype in (torch.float16, torch.bfloat16):
        q, k, v = (a.float() for a in (q, k, v))  # scores, softmax and sums in float32
        bias, sinks = (None if a is None else a.float() for a in (bias, sinks))
    L, S, d_k, d_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    nd = max(q.ndim, k.ndim, v.ndim)
    if (
        nd == 4
        and q.ndim == k.ndim == v.ndim
        and q.shape[0] == k.shape[0] == v.shape[0]
        and k.shape[1] == v.shape[1]
        and q.shape[1] % k.shape[1] == 0
    ):
        # already (B, H, L, d) and (B, G, S, d): pass them as they are (the common case)
        q4, k4, v4, G, r, batch = q, k, v, k.shape[1], q.shape[1] // k.shape[1], None
    else:
        q4, k4, v4 = (padded(a, max(nd, 4)) for a in (q, k, v))  # (..., heads, N, features)
        G, r = head_groups(q4.shape[-3], k4.shape[-3], v4.shape[-3])
        batch = tuple(np.broadcast_shapes(q4.shape[:-3], k4.shape[:-3], v4.shape[:-3]))
        q4 = q4.expand(*batch, G * r, L, d_k).reshape(-1, G * r, L, d_k)  # (B, H, L, d_k)
        k4 = k4.expand(*batch, G, S, d_k).reshape(-1, G, S, d_k)  # (B, G, S, d_k)
        v4 = v4.expand(*batch, G, S, d_v).reshape(-1, G, S, d_v)  # (B, G, S, d_v)
    attn_mask, is_causal = _torch_mask(mask, causal, L, S, q, max(nd, 4))
    if batch is not None and attn_mask is not None:  # (..., L, S) -> (B, H, L, S)
        attn_mask = attn_mask.expand(*batch, G * r, L, S).reshape(-1, G * r, L, S)
    sees = None if attn_mask is None else attn_mask.any(dim=-1, keepdim=True)  # (B, H, L, 1)
    if bias is not None or sinks is not None:
        if (
            is_causal and causal
        ):  # torch takes is_causal or a mask, not both: the triangle as a mask
            attn_mask = steps.to_device_of(masks.causal(L, S, causal), q)  # (L, S)
        attn_mask, k4, v4 = _with_bias_and_sinks(
            attn_mask, bias, sinks, q4, k4, v4, batch, max(nd, 4)
        )
        is_causal = False
    out = F.scaled_dot_product_attention(
        q4,
        k4,
        v4,
        attn_mask=attn_mask,
        is_causal=is_causal,
        scale=scale / temperature,
        enable_gqa=r > 1,
    )
    if sees is not None:  # a row that sees no key gives 0, as in the reference
        out = torch.where(sees, out, 0.0)
    # One reduction vouches for the answer: a value that is not finite, or a row that sees
    # keys and came out 0 everywhere (SDPA's 0 for a row of −inf scores; with sinks such a
    # row gives the sink all its weight, and 0 is right), leaves it to the reference.
    peak = out.detach().abs().amax(dim=-1)  # (..., L): NaN where the row holds a NaN
    if sees is not None:
        peak = torch.where(sees[..., 0], peak, 1.0)  # rows that see nothing are done
    low, high = _extremes(peak)
    if not math.isfinite(high) or (sinks is None and low == 0.0):
        return None
    if batch is not None:
        out = out.reshape(*batch, G * r, L, d_v)  # (..., H, L, d_v)
        out = out.reshape(out.shape[max(nd, 4) - nd :])  # drop the padding axes
    out = out if out.dtype == dtype else out.to(dtype)
    return out.numpy() if numpy_in else out


# Up to this many rows (a decoding step's heads) the rows' peaks are read as one list: fewer
# torch calls than a reduction and two scalars, each of which costs more than the list.
FEW_ROWS = 256


def _extremes(peak) -> tuple[float, float]:
    """(min, max) of ``peak`` as floats; NaN (either one) when it holds a NaN."""
    if peak.numel() <= FEW_ROWS:
        values = peak.reshape(-1).tolist()
        if any(x != x for x in values):  # min and max of a list skip a NaN in places
            return math.nan, math.nan
        return min(values), max(values)
    low, high = peak.aminmax()
    return float(low), float(high)


@functools.cache
def _torch():
    """(torch, torch.nn.functional), imported by the first call: a decoding step calls this
    kernel once per layer, and an import statement costs more than a cached call."""
    import torch
    import torch.nn.functional as F

    return torch, F


def _with_bias_and_sinks(allowed, bias, sinks, q4, k4, v4, batch, nd):
    """(float attn_mask, k4, v4) for SDPA: the bias (0 without one) where ``allowed`` (boolean
    (..., L, S) or None), −inf elsewhere; with sinks one more key column whose mask entry is the
    head's sink logit and whose k and v rows are 0.

    q4 (B, H, L, d_k), k4 (B, G, S, d_k), v4 (B, G, S, d_v); batch: the lead axes folded into B,
    or None when the inputs came 4-D. Returns a mask broadcastable to (B, H, L, S [+ 1]).
    """
    torch, _ = _torch()
    B, H, L, S = q4.shape[0], q4.shape[1], q4.shape[2], k4.shape[2]
    f = bias if bias is not None else torch.zeros((), dtype=q4.dtype, device=q4.device)
    f = padded(f, nd)  # (..., L, S) -> nd dimensions
    if allowed is not None:
        f = torch.where(allowed, f, float("-inf"))  # masked keys: −inf, whatever the bias
    if batch is not None and f.ndim > 2:  # (..., H, L, S) -> (B, H, L, S)
        f = f.expand(*batch, H, L, S).reshape(B, H, L, S)
    if sinks is None:
        return f, k4, v4
    # (H, 1, 1) or (1, 1) -> (B, H, L, 1): the sink's score in every row
    col = sinks.reshape(1, -1, 1, 1).to(q4.dtype).expand(B, H, L, 1)
    f = torch.cat([f.expand(B, H, L, S), col], dim=-1)  # (B, H, L, S + 1)
    k4 = torch.cat([k4, k4.new_zeros(*k4.shape[:2], 1, k4.shape[3])], dim=-2)  # (B, G, S + 1, d_k)
    v4 = torch.cat([v4, v4.new_zeros(*v4.shape[:2], 1, v4.shape[3])], dim=-2)  # (B, G, S + 1, d_v)
    return f, k4, v4


def _torch_mask(mask, causal, L, S, like, nd):
    """(attn_mask, is_causal) for SDPA: torch's own is_causal is top-left aligned. A mask gets
    leading axes up to nd (≥ 4) dimensions."""
    if mask is not None:  # (..., L, S) or (S,) -> (1, ..., L, S)
        mask = padded(mask, nd)
    if causal is None:
        return mask, False
    if mask is None and (causal == "top-left" or L == S):
        return None, True
    if mask is None and causal == "bottom-right" and L <= 1:
        return None, False  # one query at the end of the keys sees them all
    tri = steps.to_device_of(masks.causal(L, S, causal), like)  # (L, S)
    if mask is not None:
        tri = mask & tri  # (..., L, S)
    return tri, False
