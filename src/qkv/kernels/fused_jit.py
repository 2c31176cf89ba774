"""The compiled loops of the fused kernel (``kernels/fused.py``), built with numba on first use.

Scores arrive in log₂ units (q was multiplied by scale/τ·log₂e), so every exponential is 2^x.
float32 uses a vectorisable 2^x: x = n + f with n = rint(x), f ∈ [−½, ½]; 2^f by a polynomial of
degree 5 (coefficients fitted to the relative error on [−½, ½], iteratively reweighted towards
the minimax fit: a relative error below 1.6e-7 over x ∈ [−100, 0], a few float32 roundings),
2^n written straight into the exponent bits. x is at most 0 here (scores minus their row max),
or below 87 on the unshifted path; below UNDER = −100 the result is 0 (2^−100 next to a row sum
≥ 1): p·v then makes no subnormal products, which cost microcode assists on some processors.
float64 calls pow(2, x).

Each compiled function asks for the full vector width (``full_width``): LLVM's tuning for
AVX-512 Intel processors would keep to 256 bits. fastmath allows reassociation and fused
multiply-add only (so sums and dot products vectorise); NaN and ±inf keep their IEEE meaning,
which the contract relies on. The row max of an unmasked row is LLVM's ``maximum``
(NaN-propagating), which vectorises as a reduction; a non-finite max takes the per-key loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload

# 2^f ≈ 1 + Σ C_i·f^i on [−½, ½] (see above)
C1, C2, C3 = 0.6931468570246169, 0.2402223799056358, 0.05550891543013975
C4, C5 = 0.009671698524075751, 0.001321907864085474
UNDER = -100.0  # 2^x below this is 0


class _Options(TypedDict):
    nogil: bool
    cache: bool
    fastmath: set[str]


OPTS: _Options = {"nogil": True, "cache": True, "fastmath": {"reassoc", "contract"}}
W = 16  # lanes of the row max: independent maxima the compiler turns into vector code


def build() -> dict[str, Callable[..., Any]]:
    """{"tile", "norm", "finish"}: the compiled functions, each with its float32 and float64
    versions (numba picks one by the arguments' dtype; compiled on first use, or loaded from its
    cache). The decoding loop is ``decode_jit.decode``."""
    return {"tile": tile, "norm": largest_norm, "finish": finish}


def _intrinsic(codegen_typing) -> Callable[..., Any]:
    """numba's ``intrinsic``, typed as jit code calls it: without the typing context (numba's
    type stub counts ``typingctx`` among the call's arguments)."""
    return intrinsic(codegen_typing)


@_intrinsic
def _as_float32(typingctx, bits):
    """Reinterpret int32 bits as the float32 they spell (an LLVM bitcast, no conversion)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@_intrinsic
def full_width(typingctx):
    """Called first in a compiled function, its loops may use the widest vectors the processor
    has (clang's -mprefer-vector-width=512); narrower processors compile as before."""

    def codegen(context, builder, signature, args):
        # llvmlite's attribute set takes only flag attributes; this is LLVM's key="value" form
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return types.none(), codegen


@_intrinsic
def _maximum(typingctx, a, b):
    """max(a, b), NaN if either is NaN (LLVM's ``maximum``: one vector instruction sequence)."""

    def codegen(context, builder, signature, args):
        ty = args[0].type
        name = "llvm.maximum.f32" if ty == ir.FloatType() else "llvm.maximum.f64"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty, ty]), name)
        return builder.call(fn, args)

    return a(a, b), codegen


@_intrinsic
def _below(typingctx, x, limit, value):
    """``value`` where x < limit, else x (a NaN x stays): one compare and one blend."""

    def codegen(context, builder, signature, args):
        x, limit, value = args
        return builder.select(builder.fcmp_ordered("<", x, limit), value, x)

    return x(x, limit, value), codegen


@_intrinsic
def _rint(typingctx, a):
    """a rounded to the nearest integer (ties to even), as a float (LLVM's ``rint``)."""

    def codegen(context, builder, signature, args):
        ty = args[0].type
        name = "llvm.rint.f32" if ty == ir.FloatType() else "llvm.rint.f64"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty]), name)
        return builder.call(fn, args)

    return a(a), codegen


def _like(x, value):
    """``value`` in x's float type (a float64 literal would turn float32 loops into float64)."""


@overload(_like, inline="always")
def _like_impl(x, value):
    if x == types.float32:
        return lambda x, value: np.float32(value)
    return lambda x, value: np.float64(value)


def _exp2(x):
    """2^x for x ≤ 0 (or NaN): the polynomial in float32, pow in float64."""


@overload(_exp2, inline="always")
def _exp2_impl(x):
    if x == types.float32:

        def exp2_32(x):
            # below UNDER: −127, whose exponent bits are 0, so 2^x comes out 0; NaN passes
            xc = _below(x, np.float32(UNDER), np.float32(-127.0))
            n = _rint(xc)
            f = xc - n
            p = np.float32(C5) * f + np.float32(C4)
            p = p * f + np.float32(C3)
            p = p * f + np.float32(C2)
            p = p * f + np.float32(C1)
            p = (p * f + np.float32(1.0)) * _as_float32(
                (np.int32(n) + np.int32(127)) << np.int32(23)
            )  # · 2^n through the exponent bits
            return p

        return exp2_32
    return lambda x: 2.0**x


@numba.njit(inline="always", **OPTS)
def _row_max(row, hi, seen_row, has_mask, lanes):
    """max of row[j] over the visible j < hi (seen_row[j] when has_mask); −inf if none."""
    ninf = _like(row[0], -np.inf)
    lanes[:] = ninf
    full = hi - hi % W
    for j0 in range(0, full, W):
        for t in range(W):
            x = row[j0 + t]
            if has_mask:
                x = x if seen_row[j0 + t] else ninf
            lanes[t] = x if x > lanes[t] else lanes[t]  # a NaN is never the max
    mx = ninf
    for j in range(full, hi):
        x = row[j]
        if has_mask:
            x = x if seen_row[j] else ninf
        mx = x if x > mx else mx
    for t in range(W):
        mx = lanes[t] if lanes[t] > mx else mx
    return mx


@numba.njit(inline="always", **OPTS)
def _exp2_row(row, hi, shift):
    """row[j] = 2^(row[j] − shift) for j < hi, in place; returns their sum."""
    total = _like(shift, 0.0)
    for j in range(hi):
        p = _exp2(row[j] - shift)
        row[j] = p
        total += p
    return total


@numba.njit(inline="always", **OPTS)
def _row_update(row, hi, seen_row, has_mask, m_old, lanes):
    """The online-softmax step for one row, in place: row[j] = 2^(row[j] − m_new) for the
    visible keys j < hi, 0 for masked ones; returns (m_new, alpha = 2^(m_old − m_new), Σ p).
    Callers pass has_mask as a constant, so each kind compiles to its own loops."""
    one, zero = _like(m_old, 1.0), _like(m_old, 0.0)
    if not has_mask:  # every key j < hi visible: a vectorised max, then one exp2 pass
        mx = _like(m_old, -np.inf)
        for j in range(hi):
            mx = _maximum(mx, row[j])
        m_new = m_old if m_old >= mx else mx
        if m_new - m_new == zero:  # finite (no NaN, no ±inf seen): no special case per key
            alpha = one if m_new == m_old else _exp2(m_old - m_new)
            return m_new, alpha, _exp2_row(row, hi, m_new)
    mx = _row_max(row, hi, seen_row, has_mask, lanes)
    m_new = m_old if m_old >= mx else mx
    alpha = one if m_new == m_old else _exp2(m_old - m_new)  # rescales what came before
    total = zero
    for j in range(hi):  # one pass: p = 2^(s − m'), masked p = 0, Σ p
        p = one if row[j] == m_new else _exp2(row[j] - m_new)  # 1 at the max, also for ±inf
        if has_mask:
            p = p if seen_row[j] else zero
        row[j] = p
        total += p
    return m_new, alpha, total


def _signatures(kind: str) -> list:
    """The signatures compiled (all of them, on first use): per float type, arrays the function
    writes C-contiguous, the others of any layout and read-only, so that a view, a broadcast or
    a strided input never compiles a variant of its own in the middle of a run."""
    out = []
    for f in (types.float32, types.float64):

        def written(n, f=f):
            return types.Array(f, n, "C")

        def read(dtype, n):
            return types.Array(dtype, n, "A", readonly=True)

        i, b = types.int64, types.boolean
        if kind == "norm":  # rows (u, n, d) -> the largest squared norm
            out.append(f(written(3)))
        elif kind == "finish":  # m, ell, acc, out (u, h, i, d_v) -> status
            out.append(types.int64(written(2), written(2), written(3), types.Array(f, 4, "A")))
        else:  # tile: s, m, ell, acc, pos, j0, diagonal, offset, seen, has_mask, bias,
            # has_bias, fixed -> partial
            args = (written(3), written(2), written(2), written(3), read(i, 1), i, b, i)
            out.append(b(*args, read(b, 3), b, read(f, 4), b, b))
    return out


@numba.njit(_signatures("tile"), **OPTS)
def tile(s, m, ell, acc, pos, j0, diagonal, offset, seen, has_mask, bias, has_bias, fixed):
    """One tile of the blocked recurrence after s = q·kᵀ, in place.

    s (u, n, bk) log₂-unit scores -> p; m, ell (u, n) running max and sum; acc (u, n, d_v)
    rescaled by 2^(m − m'); pos (n,) query positions; on a ``diagonal`` tile row i sees keys
    j0 + j ≤ pos[i] + offset; seen (u, n, bk) the mask when has_mask; bias (u, h, n/h, bk) in
    natural units, added (times log₂e) to the keys a row may see first, when has_bias. fixed:
    every score is known to be small (no mask, bias or sinks; see ``blocked._Plan._quiet``),
    so m stays 0: no max, no rescaling, p = 2^s. Returns whether some score of the tile was
    masked (its p is 0)."""
    full_width()
    u, n, bk = s.shape
    lanes = np.empty(16, s.dtype)
    partial = has_mask
    log2e = _like(lanes[0], 1.4426950408889634)  # in s's dtype
    per_head = bias.shape[2]
    for a in range(u):
        sa = seen[a] if has_mask else seen[0]
        for i in range(n):
            hi = bk
            if diagonal:
                hi = min(bk, max(0, pos[i] + offset - j0 + 1))
                partial = partial or hi < bk
            row = s[a, i]
            if has_bias:  # the step "biased": the row's slice of the bias
                b_row = bias[a, i // per_head, i % per_head]
                for j in range(hi):
                    row[j] += b_row[j] * log2e
            if fixed:
                m_new, alpha, total = m[a, i], _like(m[a, i], 1.0), _exp2_row(row, hi, m[a, i])
            elif has_mask:
                m_new, alpha, total = _row_update(row, hi, sa[i], True, m[a, i], lanes)
            else:
                m_new, alpha, total = _row_update(row, hi, sa[0], False, m[a, i], lanes)
            for j in range(hi, bk):
                row[j] = 0.0
            ell[a, i] = ell[a, i] * alpha + total
            if alpha != 1.0:
                for c in range(acc.shape[2]):
                    acc[a, i, c] *= alpha
            m[a, i] = m_new
    return partial


@numba.njit(_signatures("norm"), **OPTS)
def largest_norm(rows):
    """max_i |rows_i|² over the rows of (u, n, d); NaN if a row holds NaN."""
    full_width()
    big = np.zeros(1, rows.dtype)[0]
    for a in range(rows.shape[0]):
        for i in range(rows.shape[1]):
            t = _like(big, 0.0)
            for c in range(rows.shape[2]):
                t += rows[a, i, c] * rows[a, i, c]
            big = _maximum(big, t)
    return big


@numba.njit(_signatures("finish"), **OPTS)
def finish(m, ell, acc, out):
    """A tile's rows done: z = a / ℓ into out (u, h, i, d_v), from m, ell (u, n) and acc
    (u, n, d_v), n = h·i. Returns 1 (nothing written) when a score was +inf (m = +inf);
    else 2 when some row summed no weight (ℓ = 0 or m = −inf: its z is 0); else 3 when some
    z is NaN or ±inf (from a NaN or ±inf input); else 0."""
    full_width()
    u, n, d_v = acc.shape
    per = out.shape[2]
    for a in range(u):
        for i in range(n):
            if m[a, i] == np.inf:
                return 1
    empty = False
    spread = np.zeros(1, acc.dtype)[0]  # Σ (z − z): 0, or NaN once a z is not finite
    for a in range(u):
        for i in range(n):
            dst = out[a, i // per, i % per]
            if ell[a, i] == 0.0 or m[a, i] == -np.inf:
                empty = True
                dst[:] = 0.0
            else:
                for c in range(d_v):
                    z = acc[a, i, c] / ell[a, i]
                    dst[c] = z
                    spread += z - z
    return 2 if empty else (0 if spread == 0.0 else 3)
