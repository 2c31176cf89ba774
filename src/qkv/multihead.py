"""Multi-head attention with per-head weights, grouped-query K/V heads and cross-attention.

Dimension names (TransformerLens / the tutorials):
    d_model   width of x            n_heads     query heads        d_head  per-head width
    n_kv_heads  K/V heads (GQA when < n_heads)
    W_Q (n_heads, d_model, d_head)   W_K, W_V (n_kv_heads, d_model, d_head)
    W_O (n_heads, d_head, d_model)   b_O (d_model,)

    out = Σ_h softmax(mask(q_h·k_hᵀ/√d_head/τ))·v_h · W_O^h + b_O
"""

from __future__ import annotations

import numpy as np

from qkv import checks, steps
from qkv.checks import positive_int
from qkv.kernels import dispatch
from qkv.lazy import lazy_attention
from qkv.trace import Trace

INIT_STD = 0.02  # N(0, 0.02²), the tutorials' small Gaussian init


class MultiHeadAttention:
    """Multi-head attention; call it on x (..., L, d_model) to get out (..., L, d_model).

    ``MultiHeadAttention(d_model, n_heads, seed)`` draws W_Q, W_K, W_V, W_O from N(0, 0.02²)
    with ``numpy.random.default_rng(seed)`` (b_O starts at 0); ``from_weights`` takes given
    arrays (NumPy or torch). Sizes are read from the weights, never stored twice.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        seed,
        *,
        d_head: int | None = None,
        n_kv_heads: int | None = None,
        qkv_bias: bool = False,
        out_bias: bool = True,
    ):
        for name, n in (("d_model", d_model), ("n_heads", n_heads)):
            positive_int(name, n)
        if d_head is None:
            if d_model % n_heads:
                raise ValueError(
                    f"d_model must be divisible by n_heads when d_head is not "
                    f"given, got d_model={d_model}, n_heads={n_heads}"
                )
            d_head = d_model // n_heads
        positive_int("d_head", d_head)
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        positive_int("n_kv_heads", n_kv_heads)
        if n_heads % n_kv_heads:
            raise ValueError(
                f"n_heads must be divisible by n_kv_heads, got n_heads={n_heads}, "
                f"n_kv_heads={n_kv_heads}"
            )
        rng = np.random.default_rng(seed)
        self.W_Q = rng.normal(0.0, INIT_STD, (n_heads, d_model, d_head))
        self.W_K = rng.normal(0.0, INIT_STD, (n_kv_heads, d_model, d_head))
        self.W_V = rng.normal(0.0, INIT_STD, (n_kv_heads, d_model, d_head))
        self.W_O = rng.normal(0.0, INIT_STD, (n_heads, d_head, d_model))
        self.b_O = np.zeros(d_model) if out_bias else None
        self.b_Q = np.zeros((n_heads, d_head)) if qkv_bias else None
        self.b_K = np.zeros((n_kv_heads, d_head)) if qkv_bias else None
        self.b_V = np.zeros((n_kv_heads, d_head)) if qkv_bias else None

    @classmethod
    def from_weights(cls, W_Q, W_K, W_V, W_O, b_O=None, *, b_Q=None, b_K=None, b_V=None):
        """Build from given arrays (shapes as in the module docstring); checks they agree."""
        self = cls.__new__(cls)
        self.W_Q, self.W_K, self.W_V, self.W_O = W_Q, W_K, W_V, W_O
        self.b_O, self.b_Q, self.b_K, self.b_V = b_O, b_Q, b_K, b_V
        self._check_shapes()
        return self

    # ---- sizes, derived from the weights ---------------------------------------------------

    n_heads = property(lambda self: self.W_Q.shape[0], doc="query heads")
    n_kv_heads = property(lambda self: self.W_K.shape[0], doc="K/V heads (fewer: grouped-query)")
    d_model = property(lambda self: self.W_Q.shape[1], doc="width of x and of the output")
    d_head = property(lambda self: self.W_Q.shape[2], doc="width of one head's q and k")

    def _check_shapes(self):
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            if getattr(self, name).ndim != 3:
                raise ValueError(
                    f"{name} must be 3-D (heads, rows, cols), got shape "
                    f"{tuple(getattr(self, name).shape)}"
                )
        H, D, d = self.W_Q.shape
        G = self.W_K.shape[0]
        expected = {
            "W_K": (G, D, d),
            "W_V": (G, D, self.W_V.shape[2]),
            "W_O": (H, self.W_V.shape[2], D),
            "b_O": (D,),
            "b_Q": (H, d),
            "b_K": (G, d),
            "b_V": (G, self.W_V.shape[2]),
        }
        for name, shape in expected.items():
            a = getattr(self, name)
            if a is not None and tuple(a.shape) != shape:
                raise ValueError(
                    f"{name} must have shape {shape} to match W_Q {(H, D, d)}, got {tuple(a.shape)}"
                )
        if G == 0 or H % G:
            raise ValueError(
                f"n_heads must be divisible by n_kv_heads, got W_Q {(H, D, d)} and "
                f"W_K {tuple(self.W_K.shape)}"
            )

    def parameters(self) -> dict:
        """The weight arrays by name (biases only when present)."""
        names = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def fused_qkv(self):
        """W_QKV (d_model, (n_heads + 2·n_kv_heads)·d_head): Q, K, V columns side by side,
        head by head, so one matmul x·W_QKV gives every head's q, k and v."""
        xp = steps.namespace(self.W_Q)
        # (heads, d_model, d_head) -> (d_model, heads·d_head), for each of W_Q, W_K, W_V
        cols = [steps.merge_heads(W) for W in (self.W_Q, self.W_K, self.W_V)]
        return xp.concat(cols, axis=-1)

    # ---- forward -----------------------------------------------------------------------------

    @checks.takes_settings
    def __call__(
        self, x, context=None, *, cache=None, return_trace=False, backend="auto", **settings
    ):
        """out = Σ_h z_h·W_O^h + b_O for x (..., L, d_model).

        mask, causal, scale (default 1/√d_head), temperature, softcap, bias, sinks: as in
        ``qkv.attention``.

        context (..., S, d_model): keys and values come from it (cross-attention).
        cache: a ``KVCache``; this call's K/V are appended and attention runs over all of them.
        backend: as in ``qkv.attention``; without a trace, "auto" runs the fused kernel (numba;
        else the blocked kernel) or torch's SDPA (tensors) once the problem is past toy size,
        e.g. decoding one token against a long cache.
        return_trace: True keeps every step (``(out, Trace)``); "lazy" runs the fast kernels and
        returns ``(out, LazyTrace)``, which keeps x, q, k, v and out and computes the other
        steps when they are read (``qkv.lazy``).
        """
        xp = steps.namespace(x, self.W_Q)
        x = checks.as_floating(x, xp)
        source = x if context is None else checks.as_floating(context, xp)
        for name, a in (("x", x), ("context", source)):
            if a.ndim < 2 or a.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} must have shape (..., length, d_model={self.d_model}), "
                    f"got {tuple(a.shape)}"
                )
        if cache is not None and context is not None:
            raise ValueError("cache= holds self-attention keys; with context= compute them once")
        q = steps.project(x, self.W_Q, self.b_Q)  # (..., n_heads, L, d_head)
        k = steps.project(source, self.W_K, self.b_K)  # (..., n_kv_heads, S, d_head)
        v = steps.project(source, self.W_V, self.b_V)  # (..., n_kv_heads, S, d_head)
        if cache is not None:
            k, v = cache.update(k, v)
        if return_trace == "lazy":
            z, trace = lazy_attention(
                q, k, v, W_O=self.W_O, b_O=self.b_O, stored={"x": x}, backend=backend, **settings
            )
            trace.stored["out"] = out = steps.project_out(z, self.W_O, self.b_O)[1]
            return out, trace
        p = checks.problem(q, k, v, **settings)
        z, traced = dispatch.compute(p, backend, return_trace=return_trace)  # (..., H, L, d_head)
        if not return_trace:
            return steps.project_out(z, self.W_O, self.b_O)[1]
        kept, settings = traced
        kept["head_out"], kept["out"] = steps.project_out(kept["z"], self.W_O, self.b_O)
        return kept["out"], Trace({"x": x, **kept}, settings)
