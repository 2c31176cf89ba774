"""The compiled parts of ``models/token_step.py``: one token through a Llama-style block, in
three calls.

    before_attention   h = RMSNorm(x);  q, k, v = h·W_QKV;  q, k = rope(q), rope(k); k and v
                       written into the KV cache's buffers
    attend             z = attention(q, K, V) over the cache (the decoding loop of
                       ``kernels/decode_jit.py``, one K/V head and its query heads at a time)
    after_attention    x += z·W_O;  x += SwiGLU(RMSNorm(x))

Each weight matrix is multiplied by its GGUF codes (``quantized_jit.times4``). The formulas are
those of ``layers.rms_norm``, ``rope.turn`` and ``layers.silu`` for one row, here in loops over
that row (float32, the RMSNorm's sum of squares in float64), so a token costs three calls per
layer instead of a few dozen NumPy calls.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from qkv.kernels.decode_jit import decode
from qkv.kernels.fused_jit import OPTS, full_width
from qkv.models.quantized_jit import times4


@numba.njit(**OPTS)
def rms_norm_into(x, gain, eps, out):
    """out = x / √(mean(x²) + eps) · gain for one row x (n,)."""
    total = 0.0
    for i in range(x.size):
        total += np.float64(x[i]) * np.float64(x[i])
    inverse = np.float32(1.0 / math.sqrt(total / x.size + eps))
    for i in range(x.size):
        out[i] = x[i] * inverse * gain[i]


@numba.njit(**OPTS)
def before_attention(x, gain, eps, qkv, cos, sin, h, y, q, k_buf, v_buf, at):
    """From the residual stream x (d_model,): h = RMSNorm(x) (gain included; written), y =
    h·W_QKV (qkv: W_QKV's Q4_1 codes, scale, low; y (H + 2G)·d_head, written), q (H, d)
    rotated by cos, sin (d/2,) in the half-split form, and the token's k (rotated) and v
    written at position ``at`` of a cache's buffers k_buf, v_buf (G, room, d)."""
    full_width()
    rms_norm_into(x, gain, eps, h)
    times4(qkv[0], qkv[1], qkv[2], h, y)
    H, d = q.shape
    G = k_buf.shape[0]
    half = d // 2
    for head in range(H + G):
        row = y[head * d : (head + 1) * d]
        out = q[head] if head < H else k_buf[head - H, at]
        for i in range(half):
            a, b = row[i], row[half + i]
            out[i] = a * cos[i] - b * sin[i]
            out[half + i] = b * cos[i] + a * sin[i]
    for g in range(G):
        v_buf[g, at, :] = y[(H + G + g) * d : (H + G + g + 1) * d]


@numba.njit(**OPTS)
def attend(q, k_buf, v_buf, S, factor, no_mask, rows, z):
    """z (G, r, d_v) = the attention of the H = G·r query heads q (H, d) over the first S
    positions of a cache's buffers k_buf (G, room, d), v_buf (G, room, d_v), each K/V
    head's r query heads together (rows (G, r, d): scratch); factor = scale·log₂e. Positions
    from S on are never read. Returns whether every z is finite (a row the loop cannot answer
    is NaN, for the engine to decide)."""
    full_width()
    H, d = q.shape
    G = k_buf.shape[0]
    r = H // G
    for head in range(H):
        for c in range(d):
            rows[head // r, head % r, c] = q[head, c] * factor
    for g in range(G):  # one query position: it sees keys 0 … S − 1
        decode(rows[g : g + 1], k_buf[g : g + 1], v_buf[g : g + 1], no_mask, False, 1, True,
               S - 1, z[g : g + 1])  # fmt: skip
    return np.isfinite(z).all()


@numba.njit(**OPTS)
def after_attention(x, z, W_O, gain, eps, W_gate, W_up, W_down, h, gate, up, y):
    """x += z·W_O, then x += (silu(h·W_gate) ⊙ h·W_up)·W_down with h = RMSNorm(x) (gain
    included); each W as its Q4_1 (codes, scale, low); h, y (d_model,) and gate, up (d_mlp,)
    scratch."""
    full_width()
    times4(W_O[0], W_O[1], W_O[2], z.reshape(z.size), y)
    x += y
    rms_norm_into(x, gain, eps, h)
    times4(W_gate[0], W_gate[1], W_gate[2], h, gate)
    times4(W_up[0], W_up[1], W_up[2], h, up)
    for i in range(gate.size):  # silu(g) = g·σ(g), σ(g) = ½(1 + tanh(g/2))
        g = gate[i]
        gate[i] = g * (np.float32(0.5) * (np.float32(1.0) + np.tanh(np.float32(0.5) * g))) * up[i]
    times4(W_down[0], W_down[1], W_down[2], gate, y)
    x += y
