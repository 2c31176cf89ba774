"""Prefill attention with matrix products of its own: a strip of MR query rows against NW keys
at a time, the MR × NW scores held in vector registers (``kernels/fused.py`` runs it for float32
tiles without a mask, a bias or a softcap).

Through NumPy, each tile of the fused kernel is two BLAS calls with the compiled pass between
them. For attention's shapes (d = 64 deep, a tile of scores wider than it is deep) BLAS loses
time outside its inner kernel: it zeroes the score tile before writing it (β = 0), packs the
whole tile of probabilities again for p·v, and the tile makes a round trip through L2 or L3
between the calls. Here, per strip of MR rows (their queries copied into MR × d):

    s[:, j:j+NW] = q_strip · K_panelᵀ       MR × NR vectors of NW = NR·W floats, d FMAs each
    p, m, ℓ, a·α                            the fused kernel's compiled pass (``fused_jit.tile``)
    a[:, c:c+NW] += p · V[j0:j1, c:c+NW]    MR × NR vectors again, one FMA per key

for blocks of STRIP_KEYS keys, so the strip's scores (MR × STRIP_KEYS floats) stay in L1. K is
packed once per K/V head into panels of NW keys (each d × NW: the FMAs read a panel's rows in
order); V is read where it lies, a row at a time (d_v a multiple of NW). The two products are
written as LLVM vector code (``_scores``, ``_accumulate``): W lanes per vector, 16 where the
processor has 512-bit vectors, else 8 (AVX2; other processors' LLVM splits or joins them).
``llvm.fmuladd`` fuses where the processor has FMA.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types

from qkv.kernels import processor
from qkv.kernels.fused_jit import OPTS, _intrinsic, full_width, tile

W = 16 if processor.current().vector_bits >= 512 else 8  # float32 lanes per vector
MR, NR = 6, 2  # a strip's rows; vectors per row of the register tile
NW = NR * W  # keys per panel (columns of the register tile)
STRIP_KEYS = 512  # keys per block of a strip: MR × 512 float32 scores (12 KiB) stay in L1

_F = ir.FloatType()
_V = ir.VectorType(_F, W)
_I64 = ir.IntType(64)


def _index(builder, base, row, stride, column):
    """base + row·stride + column, as an LLVM i64 (row a Python int or a value)."""
    row = ir.Constant(_I64, row) if isinstance(row, int) else row
    at = builder.add(base, builder.mul(row, stride))
    return builder.add(at, ir.Constant(_I64, column) if isinstance(column, int) else column)


class _Tile:
    """The MR × NR vector registers of a strip's tile, and the code that loads, updates and
    stores them (each an alloca that LLVM keeps in a register)."""

    def __init__(self, context, builder, signature, args):
        self.context, self.builder = context, builder
        self.signature, self.args = signature, args
        fn = ir.FunctionType(_V, [_V, _V, _V])
        name = f"llvm.fmuladd.v{W}f32"
        self.fmuladd = cgutils.get_or_insert_function(builder.module, fn, name)
        self.cells = [[None] * NR for _ in range(MR)]

    def data(self, i):
        """The data pointer of argument i (an array)."""
        array = self.context.make_array(self.signature.args[i])
        return array(self.context, self.builder, self.args[i]).data

    def vector(self, data, at):
        pointer = self.builder.bitcast(self.builder.gep(data, [at]), _V.as_pointer())
        return self.builder.load(pointer, align=4)

    def broadcast(self, data, at):
        x = self.builder.load(self.builder.gep(data, [at]))
        undef = ir.Constant(_V, ir.Undefined)
        one = self.builder.insert_element(undef, x, ir.Constant(ir.IntType(32), 0))
        return self.builder.shuffle_vector(
            one, undef, ir.Constant(ir.VectorType(ir.IntType(32), W), [0] * W)
        )

    def start(self, values):
        """Each cell starts at values(r, t)."""
        for r in range(MR):
            for t in range(NR):
                self.cells[r][t] = cgutils.alloca_once_value(self.builder, values(r, t))

    def step(self, rows, columns):
        """cell[r][t] += rows[r] · columns[t]: one key (or one feature) of the products."""
        b = self.builder
        for r in range(MR):
            for t in range(NR):
                cell = self.cells[r][t]
                b.store(b.call(self.fmuladd, [rows[r], columns[t], b.load(cell)]), cell)

    def store(self, data, base, stride):
        for r in range(MR):
            for t in range(NR):
                at = _index(self.builder, base, r, stride, t * W)
                pointer = self.builder.bitcast(self.builder.gep(data, [at]), _V.as_pointer())
                self.builder.store(self.builder.load(self.cells[r][t]), pointer, align=4)


@_intrinsic
def _scores(typingctx, q, d, kp, ko, s, so, lds):
    """s[so + r·lds + t] = Σ_c q[r, c]·kp[ko + c·NW + t] for r < MR, t < NW: the strip's rows
    q (MR, d) against the panel of NW keys at kp[ko] (d × NW, packed by ``pack``)."""

    def codegen(context, builder, signature, args):
        _, d, _, ko, _, so, lds = args
        tile_ = _Tile(context, builder, signature, args)
        q, kp, s = (tile_.data(i) for i in (0, 2, 4))
        tile_.start(lambda r, t: ir.Constant(_V, [0.0] * W))
        with cgutils.for_range(builder, d) as loop:
            c = loop.index
            rows = [tile_.broadcast(q, _index(builder, c, r, d, 0)) for r in range(MR)]
            keys = [
                tile_.vector(kp, _index(builder, ko, c, ir.Constant(_I64, NW), t * W))
                for t in range(NR)
            ]
            tile_.step(rows, keys)
        tile_.store(s, so, lds)
        return context.get_dummy_value()

    i = types.int64
    return types.none(q, i, kp, i, s, i, i), codegen


@_intrinsic
def _accumulate(typingctx, p, ldp, v, vo, ldv, n, a, ao, lda):
    """a[ao + r·lda + t] += Σ_{j<n} p[r·ldp + j]·v[vo + j·ldv + t] for r < MR, t < NW: the
    strip's probabilities times NW columns of n value rows."""

    def codegen(context, builder, signature, args):
        _, ldp, _, vo, ldv, n, _, ao, lda = args
        tile_ = _Tile(context, builder, signature, args)
        p, v, acc = (tile_.data(i) for i in (0, 2, 6))
        tile_.start(lambda r, t: tile_.vector(acc, _index(builder, ao, r, lda, t * W)))
        with cgutils.for_range(builder, n) as loop:
            j = loop.index
            rows = [tile_.broadcast(p, _index(builder, j, r, ldp, 0)) for r in range(MR)]
            values = [tile_.vector(v, _index(builder, vo, j, ldv, t * W)) for t in range(NR)]
            tile_.step(rows, values)
        tile_.store(acc, ao, lda)
        return context.get_dummy_value()

    i = types.int64
    return types.none(p, i, v, i, i, i, a, i, i), codegen


def packed_size(S: int, d: int) -> int:
    """Floats of K (S, d) packed: whole panels of NW keys."""
    return -(-S // NW) * NW * d


@numba.njit(
    [types.void(types.Array(types.float32, 2, "A", readonly=True), types.float32[::1])], **OPTS
)
def pack(k, kp):
    """K (S, d) -> kp: panel P (keys P·NW …) at kp[P·NW·d], row c of it the NW keys' feature c;
    keys past S are 0."""
    full_width()
    S, d = k.shape
    for j0 in range(0, S, NW):
        panel = kp[j0 * d : (j0 + NW) * d]
        for t in range(NW):
            if j0 + t < S:
                for c in range(d):
                    panel[c * NW + t] = k[j0 + t, c]
            else:
                for c in range(d):
                    panel[c * NW + t] = 0.0


def _signature():
    f, i, b = types.float32, types.int64, types.boolean
    read = types.Array(f, 2, "A", readonly=True)
    args = (
        types.Array(f, 2, "C", readonly=True),  # q
        types.Array(f, 1, "C", readonly=True),  # kp
        read,  # v
        types.Array(f, 1, "C"),  # m
        types.Array(f, 1, "C"),  # ell
        types.Array(f, 2, "C"),  # acc
        types.Array(i, 1, "A", readonly=True),  # pos
        i,  # S
        i,  # offset
        b,  # causal
        b,  # fixed
        types.Array(b, 3, "A", readonly=True),  # no_mask
        types.Array(f, 4, "A", readonly=True),  # no_bias
    )
    return [types.void(*args)]


@numba.njit(_signature(), **OPTS)
def strips(q, kp, v, m, ell, acc, pos, S, offset, causal, fixed, no_mask, no_bias):
    """The blocked recurrence for n query rows of one K/V head, in place: q (n, d) times
    scale/τ·log₂e, kp K packed (``pack``), v (S, d_v) with rows of unit stride and d_v a
    multiple of NW; m, ell (n,) and acc (n, d_v) the rows' state (as the fused kernel's ``tile``
    takes it); pos (n,) the rows' query positions; with ``causal`` row i sees keys j ≤ pos[i] +
    offset; fixed: scores known small (m stays 0, see ``tile``). no_mask, no_bias: ``tile``'s
    placeholders. A block of STRIP_KEYS keys at a time (its K and V stay in L2), every strip of
    MR rows against it."""
    full_width()
    n, d = q.shape
    d_v = v.shape[1]
    ldv = v.strides[0] // v.itemsize
    size = -(-n // MR) * MR  # rows past n repeat row n − 1; their results are dropped
    qp, posp = np.empty((size, d), q.dtype), np.empty(size, np.int64)
    mp, ellp, accp = (
        np.empty(size, q.dtype),
        np.empty(size, q.dtype),
        np.empty((size, d_v), q.dtype),
    )
    ends = np.zeros(size // MR, np.int64)  # per strip: past the last key one of its rows sees
    for i in range(size):
        r = min(i, n - 1)
        qp[i], posp[i], mp[i], ellp[i], accp[i] = q[r], pos[r], m[r], ell[r], acc[r]
        ends[i // MR] = max(ends[i // MR], min(S, pos[r] + offset + 1) if causal else S)
    scores = np.empty(MR * STRIP_KEYS, q.dtype)
    last = np.empty(MR * NW, q.dtype)  # the last, partial panel of a block
    for j0 in range(0, ends.max(), STRIP_KEYS):
        for i0 in range(0, size, MR):
            w = min(STRIP_KEYS, ends[i0 // MR] - j0)
            if w <= 0:
                continue
            whole = w - w % NW
            for j in range(0, whole, NW):
                _scores(qp[i0 : i0 + MR], d, kp, (j0 + j) * d, scores, j, w)
            if whole < w:
                _scores(qp[i0 : i0 + MR], d, kp, (j0 + whole) * d, last, 0, NW)
                for r in range(MR):
                    for t in range(w - whole):
                        scores[r * w + whole + t] = last[r * NW + t]
            s = scores[: MR * w].reshape(1, MR, w)
            m_s, ell_s = mp[i0 : i0 + MR].reshape(1, MR), ellp[i0 : i0 + MR].reshape(1, MR)
            acc_s = accp[i0 : i0 + MR].reshape(1, MR, d_v)
            tile(
                s,
                m_s,
                ell_s,
                acc_s,
                posp[i0 : i0 + MR],
                j0,
                causal,
                offset,
                no_mask,
                False,
                no_bias,
                False,
                fixed,
            )
            for c in range(0, d_v, NW):
                _accumulate(scores, w, v, j0 * ldv + c, ldv, w, accp, i0 * d_v + c, d_v)
    for i in range(n):
        m[i], ell[i], acc[i] = mp[i], ellp[i], accp[i]
