"""The compiled loop of ``models/quantized.py``, built with numba on first use.

    y_o = Σ_b scale_bo · (Σ_t code_bto · x_{32b+t})  +  low_bo · (Σ_t x_{32b+t})

for one row x. The loop runs along the outputs o (contiguous in ``codes``), so every step is a
vector of outputs: for each block b, each of its 32 inputs adds x_t · codes[b, t, :] to a
block sum (one row of codes read once, in order), then the block sum, times the block's
scale, and the block's low times Σ_t x_t are added to y. Accumulation is float32 (fastmath:
reassociation and fused multiply-add, so the loops vectorise; NaN and ±inf keep their meaning).
"""

from __future__ import annotations

import numba
import numpy as np
from numba.core import types

from qkv.kernels.fused_jit import OPTS  # nogil, cached, fastmath: reassociate and contract


def _signatures() -> list:
    """codes uint8 (Q4_1) or int8 (Q8_0); scale, low (blocks, out); has_low; x (in,); out (out,)."""
    f32 = types.float32
    out = []
    for code in (types.uint8, types.int8):
        out.append(
            types.void(
                types.Array(code, 3, "C", readonly=True),
                types.Array(f32, 2, "C", readonly=True),
                types.Array(f32, 2, "C", readonly=True),
                types.boolean,
                types.Array(f32, 1, "C", readonly=True),
                types.Array(f32, 1, "C"),
            )
        )
    return out


@numba.njit(_signatures(), **OPTS)
def times(codes, scale, low, has_low, x, out):
    """out = x · W for W (32·blocks, n) held as codes (blocks, 32, n), scale and low (blocks, n)
    (low only when has_low); x (32·blocks,), out (n,) float32."""
    blocks, _, n = codes.shape
    part = np.empty(n, np.float32)
    out[:] = 0.0
    for b in range(blocks):
        part[:] = 0.0
        total = np.float32(0.0)
        for t in range(32):
            xt = x[32 * b + t]
            total += xt
            row = codes[b, t]
            for o in range(n):
                part[o] += xt * np.float32(row[o])
        sb = scale[b]
        if has_low:
            lb = low[b]
            for o in range(n):
                out[o] += sb[o] * part[o] + lb[o] * total
        else:
            for o in range(n):
                out[o] += sb[o] * part[o]
