"""Exact attention with one compiled pass per tile (numba): the blocked kernel, fused.

The tiles, threads and recurrence are the blocked kernel's (``kernels/blocked.py``); what changes
is the work between the two matrix products. There, NumPy makes four to six passes over each
(block_q × block_k) tile of scores (max, shift, exp, sum, and for tiles on the causal diagonal a
boolean mask built and applied); here one compiled function does it in two reads of the tile:

    s    = (q · c·log₂e) · k_blockᵀ          BLAS; c = scale/τ, log₂e folded into q once
    m'   = max(m, max_j s_j)                 over the keys the row may see (masked: never read)
    p_j  = 2^(s_j − m')                      a vectorised exp2 (polynomial, float32);
                                             p = 0 for a masked key, p = 1 where s_j = m'
    ℓ'   = 2^(m − m')·ℓ + Σ_j p_j            a' = 2^(m − m')·a + p · v_block   (BLAS)

Where a tile has no mask, bias or softcap (float32, d_v a multiple of the vector width), the two
products are qkv's own instead of BLAS's (``kernels/strips_jit.py``): a strip of a few query
rows against a panel of keys in vector registers, the same compiled pass between them, K
packed once per K/V head (``_packed``). On a 2-core AMD EPYC (Zen 3), one head of 4,096
keys, one thread, the products alone ran at 86–90 GFLOP/s (92–97% of NumPy's GEMM peak)
against 79–81 through BLAS in tiles (``benchmarks/strip_products.py``, two runs).

The causal diagonal costs little: each row's loop stops at its last visible key, and a
diagonal block of one head's rows is cut into DIAGONAL_PIECES row pieces, each multiplied only
up to its own last row's last key (FlashAttention-2 and torch's CPU flash kernel compute the
whole diagonal block and mask it). When
max|q_i|·max|k_j| shows that no score can overflow 2^s (the blocked kernel's bound), m stays 0
and the pass is one exp2 loop per row (no max, no rescaling).

A step of a few query rows per K/V head against a cache (decoding, up to DECODE_ROWS rows
per K/V head, no softcap, bias or sinks) takes ``kernels/decode.py``: one compiled loop per K/V
head that reads each key and value once for all the query rows that share it, or BLAS for
rows that see every key of a long cache, from as many keys as measured on first use
(``DECODE``).

The optional steps: the bias is added inside the compiled pass, before the row max, on the
keys a row may see (+ bias·log₂e from the tile's slice of the broadcast bias, an extra
argument, a view). Sinks start each row at m = sink·log₂e, ℓ = 1 (the blocked kernel's
``start``). Soft-capping is cap₂·tanh(s/cap₂) with cap₂ = cap·log₂e (the natural-unit formula in
log₂ units), done on the tile by NumPy's vectorised tanh just before the compiled pass: a tanh
inside the numba loop (libm's, or a rational fit that vectorises) measured slower (softcap +
sinks, causal 8×2048×64 float32: 34 ms with NumPy's tanh, 50 ms with the rational fit, 97 ms
with libm's; ``benchmarks/optional_steps.py``) and less exact. With any of the three, decoding
steps take the tile pass too (the decode loop has none of them).

Contract (``qkv.attention``'s): mask True = may attend; causal bottom-right or top-left; a row
that sees no key gives 0; float16 runs in float32; a masked key's k and v never reach a result
(its score is never read and its value row is left out of p·v when it holds a non-finite
number); a NaN a row sees makes that row NaN.

Needs numba (``pip install 'qkv[fast]'``); ``available()`` says whether it is there.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from qkv.checks import Problem
from qkv.kernels import blocked, compiled, decode, decode_blas, layout, tuning

LOG2E = 1.4426950408889634
DECODE_ROWS = 8  # up to this many query rows per K/V head: a decoding step (decode.py)
DIAGONAL_PIECES = 2  # row pieces of a causal diagonal block (measured: 1 to 4 within 1%)


@functools.cache
def available() -> bool:
    """True when numba can be imported (the kernel compiles on first use)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def fused_attention(
    q, k, v, *, workers=None, block_q=None, block_k=None, vouch=False, strips=True,
    blas_keys=None, **rule,
):  # fmt: skip
    """z = softmax_sink(mask(cap(q·kᵀ·scale/τ) + bias))·v with a compiled pass per tile, for
    validated NumPy inputs: q (..., [H,] L, d_k), k (..., [G,] S, d_k), v (..., [G,] S, d_v),
    G dividing H; mask boolean broadcastable to (..., H, L, S) or None; causal None,
    "bottom-right" or "top-left"; softcap, bias, sinks as ``blocked_attention`` takes them
    (with any of them, decoding steps take the tile path too). Returns (..., [H,] L, d_v) in
    q's dtype (float16 computed in float32). The settings (``rule``) are keywords as
    ``checks.Problem`` names and defaults them. vouch: None instead of an answer that is not
    finite (a NaN or ±inf input, a row without weight), for the reference to decide; a
    decoding step learns it from its compiled pass, without another look at the output.
    strips=False: BLAS's matrix products on every tile, also where the strip kernel applies
    (the tuner measures the "fused" entry's tiles on those; the strip kernel's rows, "strips",
    with strips=True). blas_keys: a decoding step where every row sees every key reads K and V
    through BLAS from this many keys up, through the compiled loop below them
    (``kernels/decode.py``; default: ``decode_blas.blas_from``)."""
    _, _, _, mask, causal, scale, temperature, softcap, bias, sinks = Problem(q, k, v, **rule)
    dtype, work = q.dtype, (np.float64 if q.dtype == np.float64 else np.float32)
    if not q.dtype == k.dtype == v.dtype == work:  # float16: float32
        q, k, v = (a if a.dtype == work else a.astype(work) for a in (q, k, v))
    L = q.shape[-2]
    factor = scale / temperature * LOG2E  # scores in log₂ units: exp2 instead of exp
    nd = max(q.ndim, k.ndim, v.ndim, 3)
    q4, k4, v4 = (layout.padded(a, nd) for a in (q, k, v))
    G, r = blocked.head_groups(q4.shape[-3], k4.shape[-3], v4.shape[-3])
    extras = softcap is not None or bias is not None or sinks is not None
    if r * L > DECODE_ROWS or extras:
        # masked keys (a mask, or the causal diagonal) may hold anything: check v once
        finite = (mask is None and causal is None) or bool(np.isfinite(v).all())
        own = strips and _by_strips(work, mask, bias, softcap, finite, v4)
        out = blocked.blocked_attention(
            q,
            k,
            v,
            **rule,
            workers=workers,
            block_q=block_q,
            block_k=block_k,
            plan=functools.partial(_FusedPlan, finite_v=finite, own=own),
            tiles=_strip_tiles if own else ON_BLAS.hook,
        )
        if out is None or vouch and not np.isfinite(out).all():
            return None
        return out if out.dtype == dtype else out.astype(dtype)
    out, finite = decode.decoding(
        q4,
        k4,
        v4,
        mask,
        causal,
        factor,
        groups=(G, r),
        work=work,
        workers=workers,
        blas_keys=blas_keys,
        kernel=DECODE,
    )
    if vouch and not finite and not np.isfinite(out).all():
        return None
    out = out.reshape(out.shape[nd - max(q.ndim, k.ndim, v.ndim) :])  # without padding axes
    return out if out.dtype == dtype else out.astype(dtype)


# the fused kernel on BLAS's products everywhere: what the tuner measures its tiles on
on_blas_tiles = functools.partial(fused_attention, strips=False)
ON_BLAS = tuning.Kernel("fused", on_blas_tiles)


def tuned() -> tuple[tuning.Kernel, ...]:
    """This module's kernels whose tiles are measured: the strip kernel's rows ("strips"), the
    tiles on BLAS's products ("fused"), and where a decoding step leaves its loop for BLAS
    ("decode"), as ``qkv bench --tune`` lists them."""
    return strips_kernel(), ON_BLAS, DECODE


# where a decoding step against a cache (each K/V head's rows contiguous) leaves its loop for
# BLAS (decode_blas.py)
DECODE = tuning.Kernel(
    "decode",
    fused_attention,
    candidates=decode_blas.CHOICES,
    default=decode_blas.CHOICES[0],
    timer=decode_blas.steps_timer,
    problem=decode_blas.STEPS,
    describe=decode_blas.describe,
)


class _FusedPlan(blocked._Plan):
    """The blocked kernel's plan with the per-tile work done by one compiled pass between
    BLAS's products, or (``own``) by the strip kernel."""

    def __init__(self, *args, finite_v: bool, own: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.factor *= LOG2E  # scores in log₂ units
        self.log_base = LOG2E  # sink logits too
        self.finite_v = finite_v  # False: some value is NaN/inf, and may sit in a masked key
        self.own = own  # the strip kernel's products instead of BLAS's (``_by_strips``)
        self.packs: dict[tuple, tuple] = {}  # K packed for the strips, per K/V head
        self.lock = threading.Lock()

    def tile(self, q_u, k_u, v_u, m_u, b_u, sink_u, kn_u, out_u, rows):
        """The blocked recurrence for rows ``rows`` of u units (shapes as ``_Plan.tile``)."""
        h0, h1, i0, i1 = rows
        buf, qs, m, ell, acc = self.start(q_u, rows, sink_u)  # m in log₂ units
        u, n = qs.shape[:2]
        pos = np.tile(np.arange(i0, i1), h1 - h0)  # (n,) each row's query position
        kernels = compiled.kernels()
        fused = kernels["tile"]
        no_bias = compiled.NO_BIAS[np.dtype(self.dtype)]
        # every score small enough for 2^s as it is (blocked._Plan._quiet): no max, no rescale
        fixed = kn_u is not None and m_u is None
        if fixed and self._quiet(qs, kn_u, math.sqrt(kernels["norm"](qs))):
            m[:] = 0.0
        else:
            fixed = False
        # one head's consecutive rows, no mask or bias: a diagonal block is cut into row
        # pieces that stop at their own last key (less of the hidden triangle computed)
        whole = m_u is not None or b_u is not None or u > 1 or h1 - h0 > 1
        if self.own:  # products of its own: kernels/strips_jit.py
            causal, rest = self.offset is not None, (compiled.NO_MASK, no_bias)
            for a in range(u):  # (u, n, d_k), (u, S, d_k), …: unit a's
                args = (qs[a], self._packed(k_u[a]), v_u[a], m[a], ell[a], acc[a], pos, self.S)
                kernels["strips"](*args, self.offset or 0, causal, fixed, *rest)
        else:
            for j0, j1, diagonal in self.key_blocks(i0, i1):
                for r0, r1, j_end in self._pieces(n, i0, j0, j1, diagonal and not whole):
                    nr = r1 - r0  # rows in this piece
                    seen = compiled.NO_MASK
                    if m_u is not None:  # (u, h1-h0, i1-i0, bk) -> (u, n, bk)
                        seen = m_u[:, h0:h1, i0:i1, j0:j1].reshape(m_u.shape[0], -1, j1 - j0)
                        if not seen.any():
                            continue
                    s = buf.s[: u * nr * (j_end - j0)].reshape(u, nr, j_end - j0)
                    # (u, nr, d_k) @ (u, d_k, bk) -> (u, nr, bk)
                    np.matmul(qs[:, r0:r1], k_u[:, j0:j_end].transpose(0, 2, 1), out=s)
                    # (u, h1-h0, i1-i0, bk): the tile's slice of the broadcast bias, a view
                    bias = no_bias if b_u is None else b_u[:, h0:h1, i0:i1, j0:j1]
                    if self.softcap is not None:  # NumPy's SIMD tanh: see the module docstring
                        layout.softcap_in_place(s, self.softcap * LOG2E)
                    partial = fused(
                        s,
                        m[:, r0:r1],
                        ell[:, r0:r1],
                        acc[:, r0:r1],
                        pos[r0:r1],
                        j0,
                        diagonal,
                        self.offset or 0,
                        seen,
                        m_u is not None,
                        bias,
                        b_u is not None,
                        fixed,
                    )
                    pv = buf.pv[: u * nr * self.d_v].reshape(u, nr, self.d_v)
                    vb = v_u[:, j0:j_end]  # (u, bk, d_v)
                    if partial and not self.finite_v:  # keep masked values' NaN/inf out of p·v
                        vb = np.where(np.isfinite(vb), vb, 0.0).astype(self.dtype)
                        np.matmul(s, vb, out=pv)
                        _add_nonfinite(pv, s, v_u[:, j0:j_end])
                    else:
                        np.matmul(s, vb, out=pv)  # (u, nr, bk) @ (u, bk, d_v)
                    acc[:, r0:r1] += pv
        # z = a / ℓ; a row that saw no key, or whose every score is −inf, gets 0 (NaN stays)
        status = kernels["finish"](m, ell, acc, out_u[:, h0:h1, i0:i1])
        if (
            status == 1
            or status == 2
            and (((ell == 0) | (m == -np.inf)) & self._sees_keys(m_u, rows, pos)).any()
        ):
            raise blocked._NoWeight  # a +inf score or a row without weight: the reference decides

    def _packed(self, k):
        """One K/V head's K (S, d_k) packed for the strip kernel, once per call. Known by its
        data's address, and kept with it: K of a broadcast input is a copy per tile
        (``layout.Units.take``), whose address another copy could take once it is freed."""
        from qkv.kernels import strips_jit

        key = (k.__array_interface__["data"][0], k.strides)
        with self.lock:
            if key not in self.packs:
                kp = np.empty(strips_jit.packed_size(self.S, self.d_k), np.float32)
                strips_jit.pack(k, kp)
                self.packs[key] = (k, kp)
            return self.packs[key][1]

    def _pieces(self, n, i0, j0, j1, cut):
        """(r0, r1, j_end): the tile's rows r0..r1-1 take keys j0..j_end-1 of the block j0..j1-1;
        cut (a diagonal block, rows i0… of one head): DIAGONAL_PIECES row ranges, each up to
        its last row's last key, those that see none of the block left out."""
        if not cut:
            return [(0, n, j1)]
        step = -(-n // DIAGONAL_PIECES)
        out = []
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            j_end = min(j1, i0 + r1 + self.offset)  # past the last key row r1 - 1 sees
            if j_end > j0:
                out.append((r0, r1, j_end))
        return out


def _by_strips(work, mask, bias, softcap, finite, v) -> bool:
    """Whether the tiles run on the strip kernel (``kernels/strips_jit.py``): float32, no mask,
    bias or softcap, no non-finite value a row may not see, V's rows of unit stride and d_v a
    whole number of the kernel's vectors (W floats)."""
    if work is not np.float32 or mask is not None or bias is not None or softcap is not None:
        return False
    from qkv.kernels import strips_jit

    return finite and v.strides[-1] == v.itemsize and v.shape[-1] % strips_jit.W == 0


@functools.cache  # the same for the whole process: built once, not per call
def strips_kernel() -> tuning.Kernel:
    """The strip kernel as the tuner measures it: its own choices of query rows per tile, each
    with its blocks of keys (``strips_jit.STRIP_KEYS``, not tuned), and its built-in rows."""
    from qkv.kernels import strips_jit

    keys = strips_jit.STRIP_KEYS
    return tuning.Kernel(
        "strips",
        fused_attention,
        candidates=tuple(tuning.Tiles(n, keys) for n in strips_jit.STRIP_ROW_CHOICES),
        default=tuning.Tiles(strips_jit.STRIP_ROWS, keys),
    )


def _strip_tiles(units: int, rows: int, workers: int, scores: int) -> tuning.Tiles:
    """The strip kernel's tiles for ``units`` units of ``rows`` query rows: the rows measured on
    this processor (``strips_kernel``), halved (down to 128) while two or more workers would
    get fewer than 4 tiles each (a causal problem's tiles differ in cost: the last one taken
    must be short; one worker gains nothing from more tiles, and each costs its setup); the
    keys, its blocks. Forced tiles (``tuning.forced``) are taken as they are."""
    chosen = tuning.tiles(strips_kernel(), scores)
    block_q = chosen.block_q
    while workers > 1 and block_q > 128 and units * -(-rows // block_q) < 4 * workers:
        block_q //= 2
    return tuning.forced_or(tuning.Tiles(block_q, chosen.block_k))


def _add_nonfinite(pv, p, vb):
    """pv += p_j·v_j for the value rows j holding NaN/inf, only where p_j ≠ 0: a row that
    sees such a value gets NaN/inf, a row that masks it (p_j = 0) is untouched."""
    for a, j in zip(*np.nonzero(~np.isfinite(vb).all(axis=-1)), strict=False):
        rows = p[a, :, j] != 0  # (n,)
        pv[a, rows] += p[a, rows, j, None] * vb[a, j]  # (n', 1) * (d_v,) -> (n', d_v)
