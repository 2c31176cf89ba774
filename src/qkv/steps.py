"""The math steps of attention, one function per step, for any array library.

Each function takes NumPy arrays or torch tensors (through the array API standard, via
``array-api-compat``) and returns the same kind, so gradients flow when torch is used.
Shapes follow one convention: (..., L, d) for one head's sequence, heads on axis -3.

    x ──project──▶ q, k, v ──▶ scores = q·kᵀ ──·scale──▶ scaled ──÷τ──▶ tempered
      ──mask──▶ masked ──softmax──▶ weights ──·v──▶ z ──W_O^h──▶ head_out ──Σ_h + b_O──▶ out
"""

from __future__ import annotations

import math
import sys

import numpy as np
from array_api_compat import array_namespace, device

from qkv.blas import single_threaded_blas

# The project's one vocabulary for the steps, in data-flow order (docs/architecture.md).
# "rope" (rotary models only) holds q and k before rotation; "q" and "k" then hold them after.
# "capped" (soft-capping), "biased" (an additive bias) and "sink" (the weight an attention sink
# takes, (..., L, 1)) appear only when the computation has them.
STEPS = (
    "x",
    "q",
    "k",
    "v",
    "rope",
    "scores",
    "scaled",
    "tempered",
    "capped",
    "biased",
    "masked",
    "weights",
    "sink",
    "z",
    "head_out",
    "out",
)

# The steps with a head axis that one head's trace keeps (``Trace.head``).
HEAD_STEPS = STEPS[1:4] + STEPS[5:14]  # q k v scores … masked weights sink z

# Queries per matrix product in ``rows_matmul``: the products of the traced steps run on row
# tiles of this many rows, so a lazy trace that computes one tile of one head gets the numbers
# of the whole computation bit for bit (BLAS rounds a row differently as the row count varies).
ROWS = 256


def namespace(*arrays):
    """The array-API namespace shared by the given arrays (None entries ignored)."""
    given = [a for a in arrays if a is not None]
    kind = type(given[0]) if given else None
    if kind is not None and all(type(a) is kind for a in given[1:]):
        # one array type (the common case): its namespace found once, not per call (a
        # decoding step asks a few hundred times per token)
        found = _BY_TYPE.get(kind)
        if found is None:
            found = _BY_TYPE.setdefault(kind, array_namespace(*given))
        return found
    return array_namespace(*given)


_BY_TYPE: dict[type, object] = {np.ndarray: array_namespace(np.empty(0))}


def is_torch_array(x) -> bool:
    """Whether x is a torch tensor (torch is never imported for the question). A torch that
    another thread is still importing has no ``Tensor`` yet, and then nothing is one (a
    server loading a model beside a NumPy request; array_api_compat's own test raises)."""
    tensor = getattr(sys.modules.get("torch"), "Tensor", None)
    return tensor is not None and isinstance(x, tensor)


def project(x, W, b=None):
    """Project inputs into one space per head: x·W (+ b).

    x (..., L, d_model) @ W (d_model, d)          -> (..., L, d)
    x (..., L, d_model) @ W (heads, d_model, d)   -> (..., heads, L, d)
    """
    if W.ndim == 3:
        x = x[..., None, :, :]  # (..., 1, L, d_model)
    y = x @ W  # (..., [heads,] L, d)
    if b is not None:
        y = y + (b[:, None, :] if W.ndim == 3 else b)  # b: (heads, d) or (d,)
    return y


def split_heads(y, n_heads: int):
    """(..., L, n_heads·d) -> (..., n_heads, L, d)."""
    xp = namespace(y)
    *lead, L, width = y.shape
    y = xp.reshape(y, (*lead, L, n_heads, width // n_heads))  # (..., L, heads, d)
    return xp.moveaxis(y, -2, -3)  # (..., heads, L, d)


def merge_heads(y):
    """(..., n_heads, L, d) -> (..., L, n_heads·d)."""
    xp = namespace(y)
    *lead, H, L, d = y.shape
    y = xp.moveaxis(y, -3, -2)  # (..., L, heads, d)
    return xp.reshape(y, (*lead, L, H * d))


def _grouped(a, n_groups: int):
    """(..., H, L, n) -> (..., G, H/G, L, n): query heads gathered by the K/V head they share."""
    xp = namespace(a)
    *lead, H, L, n = a.shape
    return xp.reshape(a, (*lead, n_groups, H // n_groups, L, n))


def _ungrouped(a):
    """(..., G, r, L, n) -> (..., G·r, L, n)."""
    xp = namespace(a)
    *lead, G, r, L, n = a.shape
    return xp.reshape(a, (*lead, G * r, L, n))


def kv_groups(q, k) -> int:
    """Number of query heads per K/V head: 1 unless k has fewer heads than q on axis -3."""
    if q.ndim < 3 or k.ndim < 3 or q.shape[-3] == k.shape[-3]:
        return 1
    return q.shape[-3] // k.shape[-3]


def kv_head(head: int, n_heads: int, n_kv_heads: int | None) -> int:
    """The K/V head that query head ``head`` reads (grouped-query attention): query heads come
    in n_kv_heads consecutive groups of n_heads / n_kv_heads, one group per K/V head."""
    if not n_kv_heads or n_kv_heads == n_heads:
        return head
    return head // (n_heads // n_kv_heads)


def head_groups(h_q, h_k, h_v):
    """(G, r): K/V heads and query heads per K/V head; a head count of 1 broadcasts."""
    G = h_k if h_k == h_v else max(h_k, h_v)
    r = h_q // G if h_q > G else 1
    if h_q > 1 and h_q != G * r or min(h_k, h_v) not in (1, G):
        raise ValueError(
            f"heads do not line up: q has {h_q}, k {h_k}, v {h_v}; k and v need "
            "the same count, dividing q's"
        )
    return G, r


def rows_matmul(a, b):
    """a @ b, (..., M, K) @ (..., K, N) -> (..., M, N), as one BLAS call per tile of ``ROWS``
    rows of a, with BLAS on one thread (NumPy; torch tensors multiply as they are).

    BLAS rounds a row of the product differently as the number of rows or threads changes;
    with fixed tiles a row's numbers depend only on its tile, so the rows a lazy trace computes
    equal those of the whole product, bit for bit."""
    if is_torch_array(a) or is_torch_array(b):
        return a @ b
    M = a.shape[-2]
    with single_threaded_blas():
        if M <= ROWS:
            return a @ b
        lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        out = np.empty((*lead, M, b.shape[-1]), dtype=np.result_type(a, b))
        for r in range(0, M, ROWS):
            out[..., r : r + ROWS, :] = a[..., r : r + ROWS, :] @ b  # (..., ≤ROWS, N)
        return out


def scores(q, k):
    """scores = q·kᵀ.

    (..., L, d_k) @ (..., d_k, S) -> (..., L, S). When k has G < H heads, each K head serves
    H/G query heads (grouped-query attention) without copying k.
    """
    xp = namespace(q, k)
    kT = xp.matrix_transpose(k)  # (..., d_k, S)
    with np.errstate(over="ignore"):  # an overflow is reported by checks.no_overflow
        if kv_groups(q, k) == 1:
            return rows_matmul(q, kT)  # (..., L, d_k) @ (..., d_k, S) -> (..., L, S)
        G = k.shape[-3]
        # (..., G, r, L, d_k) @ (..., G, 1, d_k, S) -> (..., G, r, L, S)
        return _ungrouped(rows_matmul(_grouped(q, G), kT[..., :, None, :, :]))


def scale(scores_, factor: float):
    """scaled = scores · scale (scale = 1/√d_k by default)."""
    return scores_ * factor


def temper(scaled, tau: float):
    """tempered = scaled / τ (an overflow to ±inf is reported by the caller)."""
    if tau == 1:
        return scaled  # x / 1 is x, bit for bit: no pass over the scores
    with np.errstate(over="ignore"):
        return scaled / tau


def softcap(s, cap: float):
    """capped = cap · tanh(s / cap): logits squashed smoothly into (−cap, cap) (Gemma 2's
    soft-capping); close to s where |s| ≪ cap. Shape unchanged. A tiny cap makes s / cap
    overflow to ±inf, whose tanh is ±1: the limit, computed without a warning."""
    xp = namespace(s)
    if isinstance(s, np.ndarray):
        with np.errstate(over="ignore"):
            return cap * np.tanh(s / cap)
    return cap * xp.tanh(s / cap)


def add_bias(s, bias):
    """biased = s + bias: an additive term per (query, key) (relative position bias, ALiBi).
    bias broadcasts to s's shape (..., L, S)."""
    return s + bias


def apply_mask(tempered, mask):
    """masked = where(mask, tempered, −inf); True = may attend."""
    if mask is None:
        return tempered
    xp = namespace(tempered)
    return xp.where(mask, tempered, -math.inf)


def softmax(masked, mask=None):
    """weights = exp(s − max s) / Σ exp(s − max s), row-wise over keys, computed in ≥ float32.

    The max is a shift only: no gradient flows through it (torch's softmax does the same).
    A row whose keys are all masked (decided from ``mask``) gets weights 0; a row whose max
    is not finite (+inf or NaN among its scores, or every visible score −inf) gets NaN.
    """
    xp = namespace(masked)
    if masked.dtype not in (xp.float32, xp.float64):
        masked = xp.astype(masked, xp.float32)  # never below float32
    if masked.shape[-1] == 0:
        return masked
    row_max = _no_grad(xp.max(masked, axis=-1, keepdims=True))  # (..., L, 1)
    # a row max of ±inf or NaN leaves no defined softmax: NaN shifts the whole row to NaN
    shift = xp.where(xp.isfinite(row_max), row_max, math.nan)
    with np.errstate(invalid="ignore"):
        e = _in_place(xp.exp, masked - shift)  # (..., L, S)
    w = _in_place(xp.divide, e, xp.sum(e, axis=-1, keepdims=True))  # (..., L, S)
    if mask is None:
        return w
    live = xp.any(mask, axis=-1, keepdims=True)  # (..., L, 1)
    return w if bool(xp.all(live)) else xp.where(live, w, 0.0)  # no key to see: 0


def _in_place(f, a, *more):
    """f(a, *more) written over ``a``, a temporary of the caller's, when it is a NumPy array:
    the same numbers, without a fresh (L, S) array and the page faults of its first touch
    (a torch tensor gets a new one: its autograd may need ``a``)."""
    return f(a, *more, out=a) if isinstance(a, np.ndarray) else f(a, *more)


def softmax_with_sink(masked, sink_logits):
    """Softmax over the keys plus one sink logit per row that takes weight and adds no value:

        weights_j = exp(s_j) / (exp(sink) + Σ_k exp(s_k)),   sink = exp(sink) / (same sum)

    masked (..., L, S), sink_logits broadcastable to (..., L, 1) (one per head: (H, 1, 1)).
    Returns (weights (..., L, S), sink (..., L, 1)); each row's weights and sink sum to 1, so
    a row whose keys are all masked gives the sink all its weight. Computed in ≥ float32.
    """
    xp = namespace(masked)
    if masked.dtype not in (xp.float32, xp.float64):
        masked = xp.astype(masked, xp.float32)  # never below float32
    if is_torch_array(sink_logits) != is_torch_array(masked):
        sink_logits = to_device_of(sink_logits, masked)
    sink_logits = xp.astype(sink_logits, masked.dtype)
    lead = (*masked.shape[:-1], 1)  # (..., L, 1)
    if masked.shape[-1] == 0:
        return masked, xp.ones(
            lead, dtype=masked.dtype, device=device(masked)
        )  # no key: the sink takes it all
    row_max = xp.maximum(xp.max(masked, axis=-1, keepdims=True), sink_logits)  # (..., L, 1)
    with np.errstate(invalid="ignore"):  # inf − inf, replaced by the where
        e = xp.exp(xp.where(masked == row_max, 0.0, masked - row_max))  # (..., L, S)
    e_sink = xp.exp(sink_logits - row_max)  # (..., L, 1)
    total = xp.sum(e, axis=-1, keepdims=True) + e_sink  # (..., L, 1)
    return e / total, e_sink / total


def logsumexp(masked, mask=None):
    """lse = log Σ_j exp(masked_j) per row, with the row max subtracted first (no gradient
    through it); −inf for a row whose keys are all masked (decided from ``mask``).
    (..., L, S) -> (..., L)."""
    xp = namespace(masked)
    row_max = _no_grad(xp.max(masked, axis=-1, keepdims=True))  # (..., L, 1)
    live = None if mask is None else xp.any(mask, axis=-1, keepdims=True)
    if live is not None:
        row_max = xp.where(live, row_max, 0.0)
    total = xp.sum(xp.exp(masked - row_max), axis=-1, keepdims=True)  # (..., L, 1)
    with np.errstate(divide="ignore"):  # log 0 = −inf for a fully masked row
        lse = xp.log(total) + row_max
    if live is not None:
        lse = xp.where(live, lse, -math.inf)
    return lse[..., 0]


def _no_grad(a):
    """a as a constant for autograd (torch tensors are detached; NumPy has no gradients)."""
    return a.detach() if is_torch_array(a) else a


def merge_partials(z_a, lse_a, z_b, lse_b):
    """Combine attention over two disjoint sets of keys from each set's output and logsumexp:

        lse = log(e^lse_a + e^lse_b),   z = e^(lse_a − lse)·z_a + e^(lse_b − lse)·z_b

    z (..., L, d_v), lse (..., L). Rows with no visible key in either set stay z = 0, lse = −inf.
    """
    xp = namespace(z_a, z_b)
    lse = xp.logaddexp(lse_a, lse_b)  # (..., L)
    live = xp.isfinite(lse) | xp.isnan(lse)
    safe = xp.where(live, lse, 0.0)
    w_a = xp.where(live, xp.exp(lse_a - safe), 0.0)[..., None]  # (..., L, 1)
    w_b = xp.where(live, xp.exp(lse_b - safe), 0.0)[..., None]
    return w_a * z_a + w_b * z_b, lse


def weighted_sum(weights, v, mask=None):
    """z = weights·v, in the wider dtype of the two (float32 weights keep half-precision v
    from rounding the sum).

    (..., L, S) @ (..., S, d_v) -> (..., L, d_v); grouped-query aware like ``scores``.
    Rows whose keys are all masked give z = 0. A masked key's v never reaches z, whatever it
    holds; a NaN or ±inf in the v of a key the row sees makes the row NaN.
    """
    xp = namespace(weights, v)
    dtype = xp.result_type(weights, v)
    weights, v = (a if a.dtype == dtype else xp.astype(a, dtype) for a in (weights, v))
    with np.errstate(invalid="ignore", over="ignore"):  # 0·NaN is looked at below
        z = _times_v(weights, v)  # (..., L, S) @ (..., S, d_v) -> (..., L, d_v)
    if not bool(xp.all(xp.isfinite(z))):  # 0·NaN at a masked key, or a bad visible v
        bad = ~xp.all(xp.isfinite(v), axis=-1, keepdims=True)  # (..., S, 1)
        z = _times_v(weights, xp.where(bad, 0.0, v))
        seen = (
            xp.ones_like(weights)
            if mask is None
            else xp.astype(xp.broadcast_to(mask, weights.shape), dtype)
        )  # (..., L, S)
        sees_bad = _times_v(seen, xp.astype(bad, dtype)) > 0  # (..., L, 1)
        z = xp.where(sees_bad, math.nan, z)
    if mask is not None:
        z = xp.where(xp.any(mask, axis=-1, keepdims=True), z, 0.0)
    return z


def _times_v(weights, v):
    """(..., L, S) @ (..., [G,] S, n) -> (..., L, n), a K/V head serving its query group."""
    if kv_groups(weights, v) == 1:
        return rows_matmul(weights, v)  # (..., L, S) @ (..., S, n) -> (..., L, n)
    G = v.shape[-3]
    # (..., G, r, L, S) @ (..., G, 1, S, n) -> (..., G, r, L, n)
    return _ungrouped(rows_matmul(_grouped(weights, G), v[..., :, None, :, :]))


def project_out(z, W_O, b_O=None):
    """head_out = z_h·W_O^h per head; out = Σ_h head_out_h + b_O.

    (..., heads, L, d_head) @ (heads, d_head, d_model) -> head_out (..., heads, L, d_model)
    -> out (..., L, d_model)
    """
    xp = namespace(z, W_O)
    head_out = rows_matmul(z, W_O)  # (..., heads, L, d_model)
    out = xp.sum(head_out, axis=-3)  # (..., L, d_model)
    if b_O is not None:
        out = out + b_O
    return head_out, out


def entropy(weights):
    """Entropy −Σ w log w of each weight row in nats (0·log 0 = 0); exp(entropy) is the
    effective number of attended keys."""
    xp = namespace(weights)
    safe = xp.where(weights > 0, weights, 1.0)
    return -xp.sum(weights * xp.log(safe), axis=-1)


def to_device_of(a, like):
    """``a`` (array-like) converted to the array library and device of ``like``."""
    xp = namespace(like)
    if is_torch_array(like):
        return xp.asarray(a, device=device(like))
    return xp.asarray(a)
