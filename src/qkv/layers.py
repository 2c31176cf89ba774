"""The non-attention parts of a transformer block: norms, activations, MLPs.

Written once for NumPy arrays and torch tensors (the Mini-GPT trains with torch and is inspected
with NumPy); the real models run them in NumPy. Attention itself is never written here: it is
``qkv.attention`` / ``qkv.steps``.
"""

from __future__ import annotations

import math

import numpy as np

from qkv.steps import namespace

_erf = np.frompyfunc(math.erf, 1, 1)  # exact erf, element by element (NumPy has none)


def layer_norm(x, gain, bias, *, eps: float = 1e-5):
    """LayerNorm over d_model: (x − mean) / √(var + eps) · gain + bias; (..., L, d_model)."""
    xp = namespace(x)
    mean = xp.mean(x, axis=-1, keepdims=True)  # (..., L, 1)
    var = xp.mean((x - mean) ** 2, axis=-1, keepdims=True)  # (..., L, 1)
    return (x - mean) / xp.sqrt(var + eps) * gain + bias


def rms_norm(x, gain, *, eps: float):
    """RMSNorm over d_model: x / √(mean(x²) + eps) · gain; (..., L, d_model)."""
    xp = namespace(x)
    ms = xp.mean(x * x, axis=-1, keepdims=True)  # (..., L, 1)
    return x / xp.sqrt(ms + eps) * gain


def gelu(x):
    """GELU, tanh form: ½x(1 + tanh(√(2/π)(x + 0.044715x³)))."""
    xp = namespace(x)
    return 0.5 * x * (1.0 + xp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gelu_erf(x):
    """GELU, the exact (erf) form BERT uses: x·½·(1 + erf(x/√2)); NumPy arrays."""
    return x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0)).astype(x.dtype))


def silu(x):
    """SiLU x·σ(x), with σ(x) = ½·(1 + tanh(x/2)) so no exp can overflow."""
    xp = namespace(x)
    return x * (0.5 * (1.0 + xp.tanh(0.5 * x)))


def linear(x, W, *, matmul=None):
    """x·W as one 2-D matrix product: (..., n) @ (n, m) -> (..., m).

    NumPy runs a stacked (batch, L, n) @ (n, m) product as many small ones; folding the
    leading axes into rows hands BLAS a single call (much faster for L = 1 decoding).
    ``matmul(a, b)`` multiplies the 2-D matrices (``@`` by default)."""
    lead = x.shape[:-1]
    rows = x.reshape(-1, x.shape[-1])
    return (rows @ W if matmul is None else matmul(rows, W)).reshape(*lead, W.shape[-1])


def bert_mlp(x, W_in, b_in, W_out, b_out):
    """gelu(x·W_in + b_in)·W_out + b_out: (..., L, d_model) -> (..., L, d_mlp) -> (..., L, d_model)."""
    return linear(gelu_erf(linear(x, W_in) + b_in), W_out) + b_out


def swiglu_mlp(x, W_gate, W_up, W_down, *, times=None):
    """(silu(x·W_gate) ⊙ x·W_up)·W_down: (..., L, d_model) -> (..., L, d_mlp) -> (..., L, d_model).
    ``times(x, W)`` computes each x·W (``linear`` by default)."""
    times = times or linear
    return times(silu(times(x, W_gate)) * times(x, W_up), W_down)
