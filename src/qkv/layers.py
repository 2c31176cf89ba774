"""Transformer pieces around attention (norms, MLP activation), for NumPy arrays or torch tensors."""

from __future__ import annotations

import math

from qkv.ops import namespace


def layer_norm(x, gain, bias, eps: float = 1e-5):
    """(x − mean) / √(var + eps) · gain + bias over the last axis."""
    xp = namespace(x)
    mean = xp.mean(x, axis=-1, keepdims=True)
    var = xp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / xp.sqrt(var + eps) * gain + bias


def gelu(x):
    """GELU, tanh form: ½x(1 + tanh(√(2/π)(x + 0.044715x³)))."""
    xp = namespace(x)
    return 0.5 * x * (1.0 + xp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
