"""The decoding steps' compiled functions: the loop that reads each key once for all the rows
that share it, and a step that calls NumPy's own BLAS.

``decode``: a few query rows per K/V head (a decoding step's heads) against a cache, one K/V
head after another, a block of DECODE_BLOCK keys at a time: the scores of a block for every
row (each key read once), the online-softmax row update (``fused_jit._row_update``), then p·v
(each value read once, never a masked one).

``decode_step``: rows that see every key of a long cache are two matrix-vector products per
head and the softmax between them. Through NumPy, each product, each small array and each
check is a Python call, and right after the products have streamed K and V through the caches
each of those costs tens of microseconds. Here the whole step is one compiled function that
calls the BLAS NumPy calls: the same library, with its thread count set the same way
(``blas.single_threaded_blas`` included), found by the symbols it exports. NumPy's wheels ship
OpenBLAS as scipy-openblas, with 64-bit integers and the symbols ``scipy_cblas_sgemv64_`` and
so on; where NumPy's BLAS does not export them (another library, another build),
``functions`` returns None and the step runs through NumPy's matmul (``decode_blas.step``).
One query row per head takes gemv (K·q, then Vᵀ·p: each key and value read once, and no
packing); a few rows take gemm. Between them, the tile pass's row update, and at the end
``fused_jit.finish``: z = a / ℓ, and its statuses.
"""

from __future__ import annotations

import ctypes
import functools

import numba
import numpy as np
from llvmlite import ir
from numba.core import types

from qkv.blas import blas_libraries
from qkv.kernels.fused_jit import OPTS, _intrinsic, _like, _row_update, finish, full_width

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # CBLAS's enumerations
SYMBOLS = ("scipy_cblas_{}64_", "cblas_{}64_")  # 64-bit integers: the "64_" suffix says so


@functools.cache
def functions(dtype) -> tuple[int, int] | None:
    """The addresses of (gemv, gemm) for ``dtype`` (float32: s, float64: d) in NumPy's BLAS,
    when one of the loaded BLAS libraries exports them under a name that says its integers
    are 64-bit; else None."""
    letter = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}.get(np.dtype(dtype))
    if letter is None:
        return None
    for lib in blas_libraries():
        try:
            handle = ctypes.CDLL(lib.filepath)
        except OSError:  # pragma: no cover - a library threadpoolctl found but cannot open
            continue
        for symbol in SYMBOLS:
            names = [symbol.format(letter + kind) for kind in ("gemv", "gemm")]
            if all(hasattr(handle, name) for name in names):
                gemv, gemm = (ctypes.cast(getattr(handle, n), ctypes.c_void_p).value for n in names)
                if gemv and gemm:  # (never NULL for an exported function)
                    return gemv, gemm
    return None


DECODE_BLOCK = 256  # keys per block in the decode loop: a block's scores stay in L1


def _loop_signatures() -> list:
    """``decode``'s, per float type: q read-only and C-contiguous; K and V read-only,
    C-contiguous (the dot products vectorise: 3.5× faster) or of any layout; the mask
    read-only; out written."""
    out = []
    i, b = types.int64, types.boolean
    for f in (types.float32, types.float64):
        mask = types.Array(b, 3, "A", readonly=True)
        for kv in (types.Array(f, 3, "C", readonly=True), types.Array(f, 3, "A", readonly=True)):
            args = (types.Array(f, 3, "C", readonly=True), kv, kv, mask, b, i, b, i)
            out.append(types.void(*args, types.Array(f, 3, "A")))
    return out


@numba.njit(_loop_signatures(), **OPTS)
def decode(q, k, v, seen, has_mask, L, causal, offset, out):
    """Attention for a few query rows per K/V head, reading each key and value once: q (U, n,
    d_k) times scale/τ·log₂e, k (U, S, d_k), v (U, S, d_v), seen (U, n, S) the mask when
    has_mask, out (U, n, d_v). Row i is query i % L (rows are r heads × L); with ``causal`` it
    sees keys j ≤ i % L + offset. A masked or hidden key is never read."""
    full_width()
    U, n, d = q.shape
    S, d_v = k.shape[1], v.shape[2]
    s = np.empty((n, DECODE_BLOCK), q.dtype)
    lanes = np.empty(16, q.dtype)
    m = np.empty(n, q.dtype)
    ell = np.empty(n, q.dtype)
    acc = np.empty((n, d_v), q.dtype)
    blk = np.empty((n, d_v), q.dtype)  # a block's p·v, added to acc whole: fewer roundings
    hi = np.empty(n, np.int64)
    visible = np.empty(n, np.int64)  # keys each row sees
    zero = np.zeros(1, q.dtype)[0]  # sums stay in q's dtype
    for i in range(n):
        hi[i] = S if not causal else min(S, max(0, i % L + offset + 1))
    j_end = hi.max() if n else 0
    for a in range(U):
        m[:] = -np.inf
        ell[:] = 0.0
        acc[:] = 0.0
        visible[:] = 0
        sa = seen[a] if has_mask else seen[0]
        for j0 in range(0, j_end, DECODE_BLOCK):
            nb = min(DECODE_BLOCK, j_end - j0)
            for j in range(nb):  # scores: each key read once for every row
                for i in range(n):
                    t = zero
                    for c in range(d):
                        t += q[a, i, c] * k[a, j0 + j, c]
                    s[i, j] = t
            for i in range(n):
                row_hi = min(nb, max(0, hi[i] - j0))
                if has_mask:
                    seen_row = sa[i, j0 : j0 + nb]
                    m_new, alpha, total = _row_update(s[i], row_hi, seen_row, True, m[i], lanes)
                else:
                    m_new, alpha, total = _row_update(s[i], row_hi, sa[0], False, m[i], lanes)
                ell[i] = ell[i] * alpha + total
                if alpha != 1.0:
                    for c in range(d_v):
                        acc[i, c] *= alpha
                m[i] = m_new
            blk[:] = 0.0
            for j in range(nb):  # p·v: each value read once, only where it is visible
                for i in range(n):
                    if j0 + j < hi[i] and (not has_mask or sa[i, j0 + j]):
                        visible[i] += 1
                        p = s[i, j]
                        for c in range(d_v):
                            blk[i, c] += p * v[a, j0 + j, c]
            acc += blk
        for i in range(n):
            # a +inf score, or a row that sees keys but summed no weight (every score −inf):
            # NaN, so that the reference decides (kernels/dispatch.py)
            undefined = m[i] == np.inf or (visible[i] > 0 and (ell[i] == 0.0 or m[i] == -np.inf))
            for c in range(d_v):
                if undefined:
                    out[a, i, c] = np.nan
                else:
                    out[a, i, c] = acc[i, c] / ell[i] if ell[i] != 0.0 else 0.0


def _float_type(dtype) -> ir.Type:
    return ir.FloatType() if dtype == types.float32 else ir.DoubleType()


@_intrinsic
def _gemv(typingctx, fn, trans, m, n, a, lda, x, y):
    """y = op(a)·x by cblas_?gemv at address fn: a (m, n) row-major with row stride lda,
    op = trans (NO_TRANS or TRANS); x and y of unit stride."""

    def codegen(context, builder, signature, args):
        fn, trans, m, n, a, lda, x, y = args
        f = _float_type(signature.args[4].dtype)
        i32, i64, p = ir.IntType(32), ir.IntType(64), ir.PointerType(f)
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i64, i64, f, p, i64, p, i64, f, p, i64])
        call = builder.inttoptr(fn, fnty.as_pointer())
        data = [
            context.make_array(signature.args[i])(context, builder, args[i]).data for i in (4, 6, 7)
        ]
        one, zero = ir.Constant(f, 1.0), ir.Constant(f, 0.0)
        unit = ir.Constant(i64, 1)
        order, op = ir.Constant(i32, ROW_MAJOR), builder.trunc(trans, i32)
        builder.call(call, [order, op, m, n, one, data[0], lda, data[1], unit, zero, data[2], unit])
        return context.get_dummy_value()

    i = types.int64
    return types.none(i, i, i, i, a, i, x, y), codegen


@_intrinsic
def _gemm(typingctx, fn, trans_b, m, n, k, a, lda, b, ldb, c, ldc):
    """c = a·op(b) by cblas_?gemm at address fn, row-major: a (m, k), op(b) (k, n), c (m, n)."""

    def codegen(context, builder, signature, args):
        fn, trans_b, m, n, k, a, lda, b, ldb, c, ldc = args
        f = _float_type(signature.args[5].dtype)
        i32, i64, p = ir.IntType(32), ir.IntType(64), ir.PointerType(f)
        fnty = ir.FunctionType(
            ir.VoidType(), [i32, i32, i32, i64, i64, i64, f, p, i64, p, i64, f, p, i64]
        )
        call = builder.inttoptr(fn, fnty.as_pointer())
        data = [
            context.make_array(signature.args[i])(context, builder, args[i]).data for i in (5, 7, 9)
        ]
        one, zero = ir.Constant(f, 1.0), ir.Constant(f, 0.0)
        order, no_trans = ir.Constant(i32, ROW_MAJOR), ir.Constant(i32, NO_TRANS)
        ops = [order, no_trans, builder.trunc(trans_b, i32), m, n, k, one]
        builder.call(call, [*ops, data[0], lda, data[1], ldb, zero, data[2], ldc])
        return context.get_dummy_value()

    i = types.int64
    return types.none(i, i, i, i, i, a, i, b, i, c, i), codegen


def _signatures() -> list:
    """Per float type: q, out and the scratch C-contiguous and written; K and V read-only views
    of any layout (a cache's first S rows), whose rows the caller has checked to be of unit
    stride."""
    out = []
    for f in (types.float32, types.float64):
        kv = types.Array(f, 3, "A", readonly=True)
        c3, c2 = types.Array(f, 3, "C"), types.Array(f, 2, "C")
        out.append(types.int64(types.int64, types.int64, c3, kv, kv, c3, c2))
    return out


@numba.njit(_signatures(), **OPTS)
def decode_step(gemv, gemm, q, k, v, out, s):
    """Attention for n query rows per K/V head that see every key: q (U, n, d_k) times
    scale/τ·log₂e, k (U, S, d_k), v (U, S, d_v), out (U, n, d_v) written, s (n, S) scratch;
    gemv, gemm: the addresses from ``functions``. Returns ``fused_jit.finish``'s status: 0;
    1 a score was +inf (out unfinished); 2 a row summed no weight (its z is 0); 3 a z is NaN or
    ±inf."""
    full_width()
    U, n, d_k = q.shape
    S, d_v = k.shape[1], v.shape[2]
    lanes = np.empty(16, q.dtype)
    no_mask = np.ones(1, np.bool_)
    m = np.empty((U, n), q.dtype)
    ell = np.empty((U, n), q.dtype)
    ninf = _like(np.zeros(1, q.dtype)[0], -np.inf)
    ldk, ldv = k.strides[1] // k.itemsize, v.strides[1] // v.itemsize
    for a in range(U):
        if n == 1:
            _gemv(gemv, NO_TRANS, S, d_k, k[a], ldk, q[a, 0], s[0])  # s = K·q
        else:
            _gemm(gemm, TRANS, n, S, d_k, q[a], d_k, k[a], ldk, s, S)  # s = q·Kᵀ
        for i in range(n):
            m[a, i], _, ell[a, i] = _row_update(s[i], S, no_mask, False, ninf, lanes)
        if n == 1:
            _gemv(gemv, TRANS, S, d_v, v[a], ldv, s[0], out[a, 0])  # a = Vᵀ·p
        else:
            _gemm(gemm, NO_TRANS, n, d_v, S, s, S, v[a], ldv, out[a], d_v)  # a = p·V
    return finish(m, ell, out, out[:, None])  # z = a / ℓ in place
