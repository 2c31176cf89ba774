"""How the kernels lay arrays out for their tiles: (..., G) K/V-head units as one stack, heads
split into K/V groups, leading axes padded, and two small in-place tile steps shared by the
blocked and the fused kernel."""

from __future__ import annotations

import math

import numpy as np


class Units:
    """The inputs' (..., G) K/V-head units as stacks (u, ...), views wherever possible."""

    def __init__(self, lead, arrays):
        self.lead, self.count = lead, math.prod(lead)
        self.arrays = arrays
        self.flat = {name: flat_view(a, len(lead)) for name, a in arrays.items() if a is not None}

    def take(self, name, u0, u1):
        a = self.arrays[name]
        if a is None:
            return None
        if self.flat[name] is not None:
            return self.flat[name][u0:u1]
        index = [np.unravel_index(u, self.lead) for u in range(u0, u1)]
        if len(index) == 1:
            return a[index[0]][None]  # (1, ...), a view
        return np.stack([a[i] for i in index])  # a copy of u (short) units: broadcast inputs


def flat_view(a, n):
    """a (*lead, ...) as (U, ...) when its n lead axes merge without a copy, else None."""
    axes = [
        (size, stride)
        for size, stride in zip(a.shape[:n], a.strides[:n], strict=False)
        if size != 1
    ]
    if any(
        outer != inner * size for (_, outer), (size, inner) in zip(axes, axes[1:], strict=False)
    ):
        return None
    return a.reshape(math.prod(a.shape[:n]), *a.shape[n:])  # a view: the strides line up


def unit_rows(a) -> bool:
    """Whether each unit's rows of a (U, S, d) stack are C-contiguous, as they are in a view of
    the first S rows of a longer cache buffer: then a[u : u + 1] is C-contiguous."""
    features = a.shape[2] <= 1 or a.strides[2] == a.itemsize
    return features and (a.shape[1] <= 1 or a.strides[1] == a.shape[2] * a.itemsize)


def softcap_in_place(s, cap):
    """s = cap·tanh(s / cap), in place (a tile of scores; NumPy's vectorised tanh)."""
    with np.errstate(over="ignore"):  # a tiny cap: ±inf, whose tanh is the limit ±1
        np.multiply(s, 1.0 / cap, out=s)
    np.tanh(s, out=s)
    np.multiply(s, cap, out=s)


def sink_grid(sinks, G, r, dtype):
    """Sink logits (H, 1, 1) or (1, 1) as (G, r): query head g·r + h of K/V head g; (1, 1) when
    one logit serves every head."""
    flat = np.asarray(sinks, dtype=dtype).reshape(-1)  # (H,) or (1,)
    return flat.reshape(G, r) if flat.size == G * r else flat.reshape(1, 1)


def padded(a, nd):
    """a with leading length-1 axes up to nd dimensions (a view; a itself when it has them)."""
    if a.ndim == nd:
        return a
    return a.reshape((1,) * (nd - a.ndim) + tuple(a.shape))


def split_heads(a, G, r):
    """(..., H, N, n) -> (..., G, r, N, n) with H = G·r, or (..., 1, 1, N, n) when H = 1."""
    if a.shape[-3] == G * r:
        return a.reshape(*a.shape[:-3], G, r, *a.shape[-2:])  # splitting an axis: a view
    return a[..., None, :, :]  # (..., 1, 1, N, n)
