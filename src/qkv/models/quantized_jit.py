"""The compiled loops of ``models/quantized.py``, built with numba on first use.

    y_o = Σ_b scale_bo · (Σ_t code_bto · x_{32b+t})  +  low_bo · (Σ_t x_{32b+t})

for one row x. The loops run along the outputs o (contiguous in the codes), so every step is a
vector of outputs: for each block b, its 32 inputs add x_t · codes[b, t, :] to a block sum
(the codes read once, in order), then the block sum times the block's scale (and the block's
low times Σ_t x_t) is added to y. Q4_1 bytes hold two codes, t (low nibble) and t + 16 (high
nibble), split in float32 (hi = ⌊c/16⌋, lo = c − 16·hi: exact, and vector code, where integer
shifts would be widened to 64 bits); Q8_0 takes eight inputs a step. The scales come as
float16 bits (uint16, widened by ``_f32``: one instruction, F16C on x86) or as float32, each
loop compiled for both (float32 alone where the compiled code has no such instruction).
Accumulation is float32 (fastmath: reassociation and fused multiply-add, so the loops
vectorise; NaN and ±inf keep their meaning).
"""

from __future__ import annotations

import platform
from typing import Any

import numba
import numpy as np
from llvmlite import binding, ir
from numba.core import types

# nogil, cached, fastmath: reassociate and contract; the widest vectors the processor has
from qkv.kernels.fused_jit import OPTS, _intrinsic, full_width


def _widens_float16() -> bool:
    """Whether the code numba compiles widens a float16 in one instruction: F16C on x86 (read
    from numba's target, which NUMBA_CPU_NAME and NUMBA_CPU_FEATURES can change: without F16C,
    LLVM would call a library function that numba does not link), always on 64-bit ARM."""
    if platform.machine().lower() in ("aarch64", "arm64"):
        return True
    config: Any = numba.config  # its settings are set at import, unknown to type checkers
    if config.CPU_FEATURES is not None:
        features = config.CPU_FEATURES
    elif config.CPU_NAME not in (None, "host"):
        return False  # a named target (e.g. "generic"): its features are not known here
    else:
        features = binding.get_host_cpu_features().flatten()
    return "+f16c" in features.split(",")


WIDENS_FLOAT16 = _widens_float16()
# scale, low (blocks, n): float16 as its bits where the compiled code widens them, and float32
_SCALE_TYPES = ((types.uint16,) if WIDENS_FLOAT16 else ()) + (types.float32,)
_TABLES = [types.Array(t, 2, "C", readonly=True) for t in _SCALE_TYPES]
_ROW = types.Array(types.float32, 1, "C", readonly=True)  # x
_OUT = types.Array(types.float32, 1, "C")
_CODES4 = types.Array(types.uint8, 3, "C", readonly=True)
_CODES8 = types.Array(types.int8, 3, "C", readonly=True)


@_intrinsic
def _f32(typingctx, x):
    """A scale as float32: uint16 holds a float16's bits (LLVM's fpext: exact), float32 is
    itself."""

    def codegen(context, builder, signature, args):
        if signature.args[0] == types.uint16:
            return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
        return args[0]

    return types.float32(x), codegen


@numba.njit([types.void(_CODES4, t, t, _ROW, _OUT) for t in _TABLES], **OPTS)
def times4(codes, scale, low, x, out):
    """out = x · W, W (32·blocks, n) as Q4_1 codes (blocks, 16, n) (byte t: code t in the low
    nibble, code t + 16 in the high one), scale and low (blocks, n) as float16 bits or float32;
    x (32·blocks,), out (n,)."""
    full_width()
    blocks, _, n = codes.shape
    part = np.empty(n, np.float32)
    out[:] = 0.0
    for b in range(blocks):
        part[:] = 0.0
        total = np.float32(0.0)
        for t in range(16):
            x_lo, x_hi = x[32 * b + t], x[32 * b + 16 + t]
            total += x_lo + x_hi
            row = codes[b, t]
            for o in range(n):
                c = np.float32(row[o])
                hi = np.floor(c * np.float32(0.0625))
                part[o] += x_lo * (c - np.float32(16.0) * hi) + x_hi * hi
        sb, lb = scale[b], low[b]
        for o in range(n):
            out[o] += _f32(sb[o]) * part[o] + _f32(lb[o]) * total


@numba.njit([types.void(_CODES8, t, _ROW, _OUT) for t in _TABLES], **OPTS)
def times8(codes, scale, x, out):
    """out = x · W, W (32·blocks, n) as Q8_0 codes (blocks, 32, n) and scale (blocks, n)
    (float16 bits or float32). Eight inputs a pass over the block sum: a wide matrix's (the
    embedding's 49,152 outputs) does not fit in L1, and eight took 1.74 ms against four's 2.07
    for SmolLM2's logits, sixteen 2.18 (one core, the codes read from memory)."""
    full_width()
    blocks, _, n = codes.shape
    part = np.empty(n, np.float32)
    out[:] = 0.0
    for b in range(blocks):
        part[:] = 0.0
        for t in range(0, 32, 8):
            i = 32 * b + t
            x0, x1, x2, x3 = x[i], x[i + 1], x[i + 2], x[i + 3]
            x4, x5, x6, x7 = x[i + 4], x[i + 5], x[i + 6], x[i + 7]
            r0, r1, r2, r3 = codes[b, t], codes[b, t + 1], codes[b, t + 2], codes[b, t + 3]
            r4, r5, r6, r7 = codes[b, t + 4], codes[b, t + 5], codes[b, t + 6], codes[b, t + 7]
            for o in range(n):
                part[o] += (
                    (x0 * np.float32(r0[o]) + x1 * np.float32(r1[o]))
                    + (x2 * np.float32(r2[o]) + x3 * np.float32(r3[o]))
                ) + (
                    (x4 * np.float32(r4[o]) + x5 * np.float32(r5[o]))
                    + (x6 * np.float32(r6[o]) + x7 * np.float32(r7[o]))
                )
        sb = scale[b]
        for o in range(n):
            out[o] += _f32(sb[o]) * part[o]
