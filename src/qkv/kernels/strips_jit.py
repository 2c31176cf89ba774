"""Prefill attention with matrix products of its own: a strip of MR query rows against NW keys
at a time, the MR × NW scores held in vector registers (``kernels/fused.py`` runs it for float32
tiles without a mask, a bias or a softcap).

Through NumPy, each tile of the fused kernel is two BLAS calls with the compiled pass between
them. For attention's shapes (d = 64 deep, a tile of scores wider than it is deep) BLAS loses
time outside its inner kernel: it zeroes the score tile before writing it (β = 0), packs the
whole tile of probabilities again for p·v, and the tile makes a round trip through L2 or L3
between the calls. Here, for a block of STRIP_KEYS keys (its K and V stay in L2), every strip
of MR rows:

    p[:, j:j+NW] = 2^(q_strip · K_panelᵀ − m)    MR × NR vectors of NW = NR·W floats, d FMAs
                                                  each; the exponential in the registers too
    a[:, c:c+NW] += p · V[j0:j1, c:c+NW]          MR × NR vectors again, one FMA per key (the
                                                  columns past d_v's whole panels: W at a time)

m is each row's running max from the blocks before (0 when every score is known small, the
fused kernel's bound). While no score of the block is more than LEAD above it, p ≤ 2^LEAD
needs no rescaling, and the sums ℓ take the p as they are; a block where some score is
(rare once a row has seen a few hundred keys), the first block of a row, and the keys of the
causal diagonal go through the fused kernel's compiled pass instead (``fused_jit.tile``:
the max, the rescaling, the mask of the diagonal) on the scores alone. MR × STRIP_KEYS scores
stay in L1. K is packed once per K/V head into panels of NW keys (each d × NW: the FMAs read
a panel's rows in order); V is read where it lies, a row at a time (d_v a multiple of W).
The products and 2^x (``_Tile.exp2``: the polynomial of ``fused_jit._exp2``) are written as
LLVM vector code: W lanes per vector, 16 where the processor has 512-bit vectors, else 8
(AVX2; other processors' LLVM splits or joins them); ``llvm.fmuladd`` fuses where it can.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types

from qkv.kernels import processor
from qkv.kernels.fused_jit import C1, C2, C3, C4, C5, OPTS, UNDER, _intrinsic, full_width, tile

W = 16 if processor.current().vector_bits >= 512 else 8  # float32 lanes per vector
# a strip's rows, and vectors per row of its register tile: MR·NR accumulators, NR loads and a
# broadcast in 16 vector registers (AVX2) or 32 (AVX-512). benchmarks/strip_shapes.py, one core:
# 6×4 and 14×2 the fastest of 7 shapes on a Xeon with AVX-512 (tied within the runs' noise; 6×4
# had the best run), 6×2 of 5 on an AMD EPYC with AVX2
MR, NR = (6, 4) if W == 16 else (6, 2)
NW = NR * W  # keys per panel (columns of the register tile)
STRIP_KEYS = 512  # keys per block of a strip: MR × 512 float32 scores (12 KiB) stay in L1
# query rows per tile, measured on first use (kernels/tuning.py, "strips"), else STRIP_ROWS; not
# 2,048: its q and output rows (1 MiB) outgrow a 512 KiB L2, no faster in strip_rows.py there
STRIP_ROWS, STRIP_ROW_CHOICES = 1024, (128, 256, 512, 1024)
LEAD = 64.0  # p = 2^(s − m) up to 2^64, m a row's running max from earlier blocks

_F = ir.FloatType()
_V = ir.VectorType(_F, W)
_I64 = ir.IntType(64)


def _index(builder, base, row, stride, column):
    """base + row·stride + column, as an LLVM i64 (row a Python int or a value)."""
    row = ir.Constant(_I64, row) if isinstance(row, int) else row
    at = builder.add(base, builder.mul(row, stride))
    return builder.add(at, ir.Constant(_I64, column) if isinstance(column, int) else column)


class _Tile:
    """The MR × NR vector registers of a strip's tile (MR × vectors, given), and the code that
    loads, updates and stores them (each an alloca that LLVM keeps in a register)."""

    def __init__(self, context, builder, signature, args, vectors=None):
        self.context, self.builder = context, builder
        self.signature, self.args = signature, args
        self.nr = NR if vectors is None else vectors  # NR read when the code is generated
        fn = ir.FunctionType(_V, [_V, _V, _V])
        name = f"llvm.fmuladd.v{W}f32"
        self.fmuladd = cgutils.get_or_insert_function(builder.module, fn, name)
        self.cells = [[None] * self.nr for _ in range(MR)]

    def data(self, i):
        """The data pointer of argument i (an array)."""
        array = self.context.make_array(self.signature.args[i])
        return array(self.context, self.builder, self.args[i]).data

    def vector(self, data, at):
        pointer = self.builder.bitcast(self.builder.gep(data, [at]), _V.as_pointer())
        return self.builder.load(pointer, align=4)

    def broadcast(self, data, at):
        return self.broadcast_value(self.builder.load(self.builder.gep(data, [at])))

    def broadcast_value(self, x):
        """x in every lane."""
        undef = ir.Constant(ir.VectorType(x.type, W), ir.Undefined)
        one = self.builder.insert_element(undef, x, ir.Constant(ir.IntType(32), 0))
        return self.builder.shuffle_vector(
            one, undef, ir.Constant(ir.VectorType(ir.IntType(32), W), [0] * W)
        )

    def start(self, values):
        """Each cell starts at values(r, t)."""
        for r in range(MR):
            for t in range(self.nr):
                self.cells[r][t] = cgutils.alloca_once_value(self.builder, values(r, t))

    def step(self, rows, columns):
        """cell[r][t] += rows[r] · columns[t]: one key (or one feature) of the products."""
        b = self.builder
        for r in range(MR):
            for t in range(self.nr):
                cell = self.cells[r][t]
                b.store(b.call(self.fmuladd, [rows[r], columns[t], b.load(cell)]), cell)

    def splat(self, value, kind=_F):
        return ir.Constant(ir.VectorType(kind, W), [value] * W)

    def exp2(self, x, clamp):
        """2^x lane by lane, as ``fused_jit._exp2`` computes it; clamp: 0 below UNDER (NaN
        kept), else x is known to be above −126."""
        b, i32 = self.builder, ir.IntType(32)
        if clamp:
            x = b.select(b.fcmp_ordered("<", x, self.splat(UNDER)), self.splat(-127.0), x)
        rint = ir.FunctionType(_V, [_V])
        n = b.call(cgutils.get_or_insert_function(b.module, rint, f"llvm.rint.v{W}f32"), [x])
        f = b.fsub(x, n)
        p = self.splat(float(np.float32(C5)))
        for c in (C4, C3, C2, C1, 1.0):
            p = b.call(self.fmuladd, [p, f, self.splat(float(np.float32(c)))])
        bits = b.add(b.fptosi(n, ir.VectorType(i32, W)), self.splat(127, i32))
        return b.fmul(p, b.bitcast(b.shl(bits, self.splat(23, i32)), _V))

    def powers(self, sums, shifts, limit):
        """Each cell s -> p = 2^(s − shifts[r]) (shifts None: 2^s, s known small), and the
        row's sum vector sums[r·W …] += p. Returns whether some s − shift was above
        ``limit`` (an LLVM i1; false without shifts)."""
        b = self.builder
        above = ir.Constant(ir.VectorType(ir.IntType(1), W), [0] * W)
        for r in range(MR):
            at = ir.Constant(_I64, r * W)
            total = self.vector(sums, at)
            shift = None if shifts is None else self.broadcast(shifts, ir.Constant(_I64, r))
            for t in range(self.nr):
                x = b.load(self.cells[r][t])
                if shift is not None:
                    x = b.fsub(x, shift)
                    above = b.or_(above, b.fcmp_ordered(">", x, self.broadcast_value(limit)))
                p = self.exp2(x, clamp=shift is not None)
                b.store(p, self.cells[r][t])
                total = b.fadd(total, p)
            b.store(total, b.bitcast(b.gep(sums, [at]), _V.as_pointer()), align=4)
        bits = b.bitcast(above, ir.IntType(W))
        return b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(W), 0))

    def store(self, data, base, stride):
        for r in range(MR):
            for t in range(self.nr):
                at = _index(self.builder, base, r, stride, t * W)
                pointer = self.builder.bitcast(self.builder.gep(data, [at]), _V.as_pointer())
                self.builder.store(self.builder.load(self.cells[r][t]), pointer, align=4)


def _products(tile_, args):
    """The cells = the strip's rows (argument 0, d = argument 1) times the panel of keys at
    argument 2 from index argument 3: ``_scores``'s loop."""
    builder, (_, d, _, ko) = tile_.builder, args[:4]
    q, kp = tile_.data(0), tile_.data(2)
    tile_.start(lambda r, t: tile_.splat(0.0))
    with cgutils.for_range(builder, d) as loop:
        c = loop.index
        rows = [tile_.broadcast(q, _index(builder, c, r, d, 0)) for r in range(MR)]
        keys = [
            tile_.vector(kp, _index(builder, ko, c, ir.Constant(_I64, NW), t * W))
            for t in range(tile_.nr)
        ]
        tile_.step(rows, keys)


@_intrinsic
def _scores(typingctx, q, d, kp, ko, s, so, lds):
    """s[so + r·lds + t] = Σ_c q[r, c]·kp[ko + c·NW + t] for r < MR, t < NW: the strip's rows
    q (MR, d) against the panel of NW keys at kp[ko] (d × NW, packed by ``pack``)."""

    def codegen(context, builder, signature, args):
        tile_ = _Tile(context, builder, signature, args)
        _products(tile_, args)
        tile_.store(tile_.data(4), args[5], args[6])
        return context.get_dummy_value()

    i = types.int64
    return types.none(q, i, kp, i, s, i, i), codegen


def _powers_of(shifted: bool):
    """``_scores`` with p = 2^(s − shift) in place of s, each row's p summed into sums[r·W …]
    (W lanes): shifted, by shifts[r] (the rows' running max), p = 0 below 2^UNDER, and the
    intrinsic returns whether some s − shift was above ``limit`` (then p may have overflowed:
    nothing it wrote counts); else no shift (the scores known small) and it returns False."""

    @_intrinsic
    def powers(typingctx, q, d, kp, ko, s, so, lds, sums, shifts, limit):
        def codegen(context, builder, signature, args):
            tile_ = _Tile(context, builder, signature, args)
            _products(tile_, args)
            value = args[9]
            if value.type != _F:  # a float64 number
                value = builder.fptrunc(value, _F)
            by = tile_.data(8) if shifted else None
            above = tile_.powers(tile_.data(7), by, value)
            tile_.store(tile_.data(4), args[5], args[6])
            return above

        i = types.int64
        return types.boolean(q, i, kp, i, s, i, i, sums, shifts, limit), codegen

    return powers


_powers, _shifted_powers = _powers_of(False), _powers_of(True)


def _accumulate_of(vectors):
    """a[ao + r·lda + t] += Σ_{j<n} p[r·ldp + j]·v[vo + j·ldv + t] for r < MR, t < vectors·W
    (None: NR vectors, a panel of NW): the strip's probabilities times those columns of n
    value rows."""

    @_intrinsic
    def accumulate(typingctx, p, ldp, v, vo, ldv, n, a, ao, lda):
        def codegen(context, builder, signature, args):
            _, ldp, _, vo, ldv, n, _, ao, lda = args
            tile_ = _Tile(context, builder, signature, args, vectors)
            p, v, acc = (tile_.data(i) for i in (0, 2, 6))
            tile_.start(lambda r, t: tile_.vector(acc, _index(builder, ao, r, lda, t * W)))
            with cgutils.for_range(builder, n) as loop:
                j = loop.index
                rows = [tile_.broadcast(p, _index(builder, j, r, ldp, 0)) for r in range(MR)]
                at = [_index(builder, vo, j, ldv, t * W) for t in range(tile_.nr)]
                tile_.step(rows, [tile_.vector(v, x) for x in at])
            tile_.store(acc, ao, lda)
            return context.get_dummy_value()

        i = types.int64
        return types.none(p, i, v, i, i, i, a, i, i), codegen

    return accumulate


# a panel of NW columns; one vector of W (the columns of d_v past its whole panels)
_accumulate, _accumulate_one = _accumulate_of(None), _accumulate_of(1)


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


@numba.njit(inline="always", **OPTS)
def _powers_into(rows, kp, j0, w, scores, sums, shifts, fixed):
    """p = 2^(s − shift) for keys j0 … j0 + w − 1 (whole panels) into scores (MR × w), their
    sums per row into sums (W lanes a row); False when some score was more than LEAD above
    its row's shift (then nothing written counts). fixed: no shift (scores known small)."""
    d = rows.shape[1]
    sums[:] = 0.0
    above = False
    for j in range(0, w, NW):
        at = (j0 + j) * d
        if fixed:
            _powers(rows, d, kp, at, scores, j, w, sums, shifts, LEAD)
        else:
            above |= _shifted_powers(rows, d, kp, at, scores, j, w, sums, shifts, LEAD)
    return not above


@numba.njit(inline="always", **OPTS)
def _products_pv(p, w, v, j0, ldv, acc, i0):
    """acc[i0 … i0 + MR − 1] += p (MR × w) · v[j0 … j0 + w − 1], NW columns at a time, then
    W at a time (d_v a multiple of W)."""
    d_v = acc.shape[1]
    whole = d_v - d_v % NW
    for c in range(0, whole, NW):
        _accumulate(p, w, v, j0 * ldv + c, ldv, w, acc, i0 * d_v + c, d_v)
    for c in range(whole, d_v, W):
        _accumulate_one(p, w, v, j0 * ldv + c, ldv, w, acc, i0 * d_v + c, d_v)


@numba.njit(inline="always", **OPTS)
def _tail(scores, last, w, whole):
    """The partial panel's w − whole keys from ``last`` (MR × NW) into the block's rows."""
    for r in range(MR):
        for t in range(w - whole):
            scores[r * w + whole + t] = last[r * NW + t]


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
    multiple of W; m, ell (n,) and acc (n, d_v) the rows' state (as the fused kernel's ``tile``
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
    mp, ellp = np.empty(size, q.dtype), np.empty(size, q.dtype)
    accp = np.empty((size, d_v), q.dtype)
    # per strip: past the last key one of its rows sees, and the first key one does not
    ends, seen = np.zeros(size // MR, np.int64), np.full(size // MR, S, np.int64)
    for i in range(size):
        r = min(i, n - 1)
        qp[i], posp[i], mp[i], ellp[i], accp[i] = q[r], pos[r], m[r], ell[r], acc[r]
        visible = max(0, min(S, pos[r] + offset + 1)) if causal else S
        ends[i // MR], seen[i // MR] = max(ends[i // MR], visible), min(seen[i // MR], visible)
    scores = np.empty(MR * STRIP_KEYS, q.dtype)
    last = np.empty(MR * NW, q.dtype)  # the last, partial panel of a block
    sums = np.empty(MR * W, q.dtype)  # the rows' sums of p, W lanes each
    for j0 in range(0, ends.max(), STRIP_KEYS):
        for i0 in range(0, size, MR):
            k = i0 // MR
            w = min(STRIP_KEYS, ends[k] - j0)  # keys of the block some row of the strip sees
            if w <= 0:
                continue
            rows, shifts = qp[i0 : i0 + MR], mp[i0 : i0 + MR]
            fast = 0  # the block's first keys, whole panels that every row sees: p in registers
            if fixed or shifts.min() > -np.inf:  # while every row has a shift (its m)
                fast = max(0, min(w, seen[k] - j0))
                fast -= fast % NW
            if fast and _powers_into(rows, kp, j0, fast, scores, sums, shifts, fixed):
                for r in range(MR):
                    ellp[i0 + r] += sums[r * W : (r + 1) * W].sum()
                _products_pv(scores, fast, v, j0, ldv, accp, i0)
            else:
                fast = 0  # a score more than LEAD above its row's shift: all through the pass
            if fast < w:  # the rest: the scores, then the fused kernel's pass
                j1, u = j0 + fast, w - fast
                for j in range(0, u - u % NW, NW):
                    _scores(rows, d, kp, (j1 + j) * d, scores, j, u)
                if u % NW:
                    _scores(rows, d, kp, (j1 + u - u % NW) * d, last, 0, NW)
                    _tail(scores, last, u, u - u % NW)
                s = scores[: MR * u].reshape(1, MR, u)
                m_s, ell_s = shifts.reshape(1, MR), ellp[i0 : i0 + MR].reshape(1, MR)
                acc_s = accp[i0 : i0 + MR].reshape(1, MR, d_v)
                placeholders = (no_mask, False, no_bias, False)
                tile(
                    s,
                    m_s,
                    ell_s,
                    acc_s,
                    posp[i0 : i0 + MR],
                    j1,
                    causal,
                    offset,
                    *placeholders,
                    fixed,
                )
                _products_pv(scores, u, v, j1, ldv, accp, i0)
    for i in range(n):
        m[i], ell[i], acc[i] = mp[i], ellp[i], accp[i]
