"""Which code computes ``qkv.attention``: the traced reference, the blocked kernel, or torch.

    reference  every step kept (scores, weights, ...): what a trace needs, O(L·S) memory
    blocked    blocked online softmax in NumPy (``kernels/blocked.py``): same numbers, O(block)
    torch      torch's ``scaled_dot_product_attention`` (``kernels/torch_sdpa.py``)
    fused      the blocked kernel with one compiled pass per tile (``kernels/fused.py``, numba)
    auto       reference when a trace is asked for or the problem is tiny; torch for torch
               tensors; fused for NumPy arrays when numba is installed (also for one-query
               decoding steps of any size), else blocked

The optional steps (softcap, bias, sinks) run in every kernel, with the reference's order
(tempered → capped → biased → masked → softmax with the sink in each row's denominator) and
numbers, with one exception: torch's SDPA has no place for soft-capping, so torch inputs with
``softcap`` (under "auto", and also when backend="torch" is asked for explicitly, with NumPy
or torch inputs) run the reference, which computes in torch and keeps autograd: the same
numbers, never an error. The fused kernel computes all three inside its compiled tile pass;
with any of them a decoding step takes that tile pass instead of its decode loop.

Inputs arrive checked (``checks.problem``), so bad input gets the same error whichever path
runs, and every kernel keeps the reference's conventions (mask True = may attend, causal
alignment, a row that sees no key gives 0, also with sinks: the sink takes all its weight).
Where a kernel's answer is not finite (a NaN or
±inf input, garbage at a masked key, an overflow), ``run`` returns None and the caller runs the
reference, whose steps decide: NaN rows, or the overflow error; the same for a sink logit that
is ±inf or NaN. The common path pays one finiteness check of the output; the fused kernel
vouches for its own (``vouch=True``), and a decoding step learns it from its compiled pass.
"""

from __future__ import annotations

import math

import numpy as np

from qkv import steps
from qkv.checks import Problem
from qkv.kernels import fused
from qkv.kernels.blocked import blocked_attention
from qkv.kernels.torch_sdpa import torch_attention
from qkv.reference import traced_steps
from qkv.steps import is_torch_array

BACKENDS = ("auto", "reference", "blocked", "fused", "torch")
# Up to this many scores (heads·L·S) the reference's few whole-array operations beat the
# kernel's per-tile bookkeeping; `qkv bench --T 128,256` times both on this machine.
SMALL_SCORES = 1 << 14


def choose(backend, p: Problem, *, return_trace=False) -> str:
    """The backend that will run: ``backend`` itself, or what "auto" picks for these inputs."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if return_trace:
        if backend not in ("auto", "reference"):
            raise ValueError(
                f"return_trace=True needs every step, which only the reference "
                f"path keeps: use backend='auto' or 'reference', got {backend!r}"
            )
        return "reference"
    numpy_in = type(p.q) is np.ndarray and type(p.k) is np.ndarray  # no array-API lookups
    numpy_in = numpy_in and (p.v is None or type(p.v) is np.ndarray)
    torch_in = not numpy_in and (is_torch_array(p.q) or is_torch_array(p.k) or is_torch_array(p.v))
    if backend in ("blocked", "fused") and torch_in:
        raise TypeError(
            f"backend={backend!r} runs on NumPy arrays, got torch tensors; use "
            "backend='torch' or 'auto' for tensors"
        )
    if backend == "fused" and not fused.available():
        raise ImportError(
            "backend='fused' needs numba: pip install 'qkv[fast]' (or use "
            "backend='blocked', the same kernel in NumPy)"
        )
    if backend == "torch" or backend == "auto" and torch_in:
        if 0 in (*p.q.shape, *p.k.shape, *p.v.shape):
            return "reference"  # torch refuses empty sizes: the reference's answer is exact
        if p.softcap is not None:
            return "reference"  # SDPA has no step between the scores and the mask
        return "torch"
    if backend != "auto":
        return backend
    heads = max(math.prod(p.q.shape[:-2]), math.prod(p.k.shape[:-2]))  # (..., H, L, d) -> ...·H
    decoding = p.q.shape[-2] == 1  # one compiled loop beats the reference's array steps
    if fused.available() and (decoding or heads * p.q.shape[-2] * p.k.shape[-2] > SMALL_SCORES):
        return "fused"  # the blocked plan with one compiled pass per tile (`qkv bench` compares)
    if heads * p.q.shape[-2] * p.k.shape[-2] <= SMALL_SCORES:
        return "reference"
    return "blocked"


def compute(p: Problem, backend="auto", *, return_trace=False):
    """The one way through for every attention call (``qkv.attention``, ``MultiHeadAttention``,
    the models, the transformers adapter): choose the backend, run it, and let the reference's
    steps decide where the kernel cannot vouch for its answer (NaN rows, the overflow error).

    Returns ``(z, None)``, or ``(z, (steps, settings))`` when the reference ran and kept its
    steps (always with ``return_trace=True``)."""
    name = choose(backend, p, return_trace=return_trace)
    if name != "reference":
        z = run(name, p)
        if z is not None:
            return z, None
    kept, settings = traced_steps(p)
    return kept["z"], (kept, settings)


def run(name: str, p: Problem):
    """Attention by the kernel ``name`` ("blocked", "fused" or "torch") on checked inputs; None
    when the kernel cannot vouch for its answer (see above): then the reference decides."""
    kernel = {
        "blocked": blocked_attention,
        "fused": fused.fused_attention,
        "torch": torch_attention,
    }[name]
    if p.sinks is not None and not _all_finite(p.sinks):
        return None  # a ±inf or NaN sink logit: the reference's steps decide
    if name == "fused":  # vouches for its own answer, from its compiled passes where it can
        return kernel(p.q, p.k, p.v, vouch=True, **p.rule())
    out = kernel(p.q, p.k, p.v, **p.rule())
    if out is None or name == "torch":  # torch_attention vouches for its own answer
        return out
    return out if _all_finite(out) else None


def _all_finite(a) -> bool:
    if type(a) is np.ndarray:  # without the array-API lookup (decoding calls this per layer)
        return bool(np.isfinite(a).all())
    xp = steps.namespace(a)
    return bool(xp.all(xp.isfinite(a)))
