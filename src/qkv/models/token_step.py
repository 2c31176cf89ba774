"""One generated token through SmolLM2's blocks in compiled code, three calls per layer.

A decoding step multiplies one row by every weight matrix (by their GGUF codes,
``models/quantized.py``) and attends over the KV cache: little arithmetic per NumPy call, so
through NumPy much of a short prompt's token is the Python between the calls (norms, RoPE,
head reshapes, the activation, the products' wrappers, the attention call's checks:
``benchmarks/generation_breakdown.py --numpy-path``). Here each layer is
``token_step_jit.before_attention`` (RMSNorm, the Q/K/V product, RoPE; k and v written into
the cache's buffers, ``KVCache.append_in_place``), ``attend`` (the decoding loop of
``kernels/decode_jit.py``, reading the cache's buffers in place) and ``after_attention`` (W_O,
the residuals, the MLP). The NumPy path (``SmolLM2._forward``) defines the numbers; this one
agrees with it to float32 rounding (``tests/models/test_models_token_step.py``).

It applies to a step of one token in float32, with numba, when every block's five matrices are
multiplied by their Q4_1 codes (``Block.step_tables``: none replaced since the model was
loaded) and no trace is kept;
``step`` returns None otherwise, and the model takes its NumPy path. A row the decoding loop
cannot answer (a +inf score, a row without weight) goes to ``qkv.attention``, whose reference
decides, as on the NumPy path; so does a step the engine would not give to the loop on the
calling thread (``kernels/decode.py``'s ``route``: BLAS from as many keys as the tuner measured
on this processor, or the loop on a worker per CPU for a long cache).
"""

from __future__ import annotations

import numpy as np

from qkv.attention import attention
from qkv.cache import KVCache
from qkv.kernels import decode
from qkv.kernels.compiled import NO_MASK
from qkv.kernels.fused import DECODE, LOG2E, available


def step(blocks, x: np.ndarray, caches: list[KVCache], cos, sin, *, eps: float):
    """The residual stream after every block for one token: x (d_model,) float32 (the token's
    embedding; updated in place and returned), caches one KVCache per block (each gets this
    token's k and v), cos, sin (d_head/2,) its RoPE angles. None, with nothing changed, where
    the step does not apply (see the module's docstring)."""
    if x.dtype != np.float32 or not available():
        return None
    first = blocks[0]
    H, G = first.n_heads, first.n_kv_heads
    d = first.W_O.shape[0] // H
    tables = [blk.step_tables() for blk in blocks]
    if any(t is None for t in tables) or not all(_numpy_cache(c, G, d) for c in caches):
        return None
    from qkv.models import token_step_jit as jit

    d_mlp = first.W_gate.shape[1]
    h, y = np.empty(x.size, np.float32), np.empty((H + 2 * G) * d, np.float32)
    q = np.empty((H, d), np.float32)
    rows, z = (np.empty((G, H // G, d), np.float32) for _ in range(2))
    gate, up = (np.empty(d_mlp, np.float32) for _ in range(2))
    factor = np.float32(LOG2E / np.sqrt(d))  # scale 1/√d_head, in log₂ units
    for blk, (W_QKV, W_O, W_gate, W_up, W_down), cache in zip(blocks, tables, caches, strict=True):
        # this token's k and v go straight into the cache's buffers (1, G, room, d)
        cache.append_in_place(1, _writer(jit, x, blk, eps, W_QKV, cos, sin, h, y, q))
        k_buf, v_buf = cache.buffers
        # the engine's own choice for this step: BLAS, or the loop on its workers, or here
        blas, workers = decode.route(
            G, cache.length, 2 * d, sees_all=True, in_rows=True, blas_keys=None, kernel=DECODE,
            workers=None,
        )  # fmt: skip
        here = not blas and workers == 1
        S = cache.length
        if not (here and jit.attend(q, k_buf[0], v_buf[0], S, factor, NO_MASK, rows, z)):
            z[:] = attention(q[None, :, None, :], cache.k, cache.v, causal=True).reshape(z.shape)
        jit.after_attention(
            x, z, W_O, blk.mlp_norm, eps, W_gate, W_up, W_down, h, gate, up, y[: x.size]
        )
    return x


def _writer(jit, x, blk, eps, W_QKV, cos, sin, h, y, q):
    """``write(k_buffer, v_buffer, at)`` for ``KVCache.append_in_place``: the block's
    ``before_attention``, its k and v written at position ``at``."""

    def write(k_buf, v_buf, at):
        jit.before_attention(
            x, blk.attn_norm, eps, W_QKV, cos, sin, h, y, q, k_buf[0], v_buf[0], at
        )

    return write


def _numpy_cache(cache: KVCache, G: int, d: int) -> bool:
    """Whether the cache holds float32 NumPy buffers (1, G, room, d) of one sequence, which the
    compiled calls read and write in place."""
    for b in cache.buffers:
        if not (
            type(b) is np.ndarray
            and b.dtype == np.float32
            and b.flags.c_contiguous
            and b.ndim == 4
            and b.shape[0] == 1
            and b.shape[1] == G
            and b.shape[3] == d
        ):
            return False
    return True
