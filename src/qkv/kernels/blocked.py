"""Exact attention without the L×S matrix: blocked online softmax in NumPy.

For each block of query rows, keys are visited block by block while every row keeps a running
maximum m, a running sum ℓ and an unnormalised output a (FlashAttention's recurrence):

    s   = (q·c)·k_blockᵀ                  c = scale / τ, folded into q once
    s   = cap·tanh(s / cap) + bias_tile   the optional steps "capped" and "biased", in place
    m'  = max(m, max_j s_j)               α = exp(m − m')
    ℓ'  = α·ℓ + Σ_j exp(s_j − m')         a' = α·a + exp(s − m')·v_block
    z   = a / ℓ   (0 where the row sees no key)

Sinks (one logit per query head) start each row at m = sink, ℓ = e^(sink − m) = 1, a = 0: the
sink's term joins every row's denominator, is rescaled by α like the rest, and adds no value; a
row that sees no key ends with a = 0, ℓ > 0, so z = 0 (the sink took all the weight). The bias
is never copied whole: it stays a broadcast view of what was passed, and each tile adds its
(rows × keys) slice.

When max|q_i|·max|k_j| (Cauchy–Schwarz; or the cap, with softcap) shows every score is small
enough that exp cannot overflow or lose a row's largest term, m stays 0: no max, shift or
rescale passes (α = 1). A bias or sinks always take the shifted path.

Only one (block_q, block_k) tile of scores exists at a time per worker. Key blocks that the
causal mask hides entirely are skipped; fully visible ones are not masked at all. Query heads
that share a K/V head (grouped-query attention) are stacked as rows of one matrix, so a one-token
decoding step against a long cache is a few matrix-vector products per K/V head.

Conventions are the reference's (``qkv.attention``): mask True = may attend, causal alignment
bottom-right or top-left, a row that sees no key gives 0, a NaN in anything a row sees gives NaN.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from qkv.checks import Problem
from qkv.kernels import layout, tuning
from qkv.kernels.threads import default_workers, single_threaded_blas, spread
from qkv.steps import head_groups

# |scores| below which exp(s) needs no shift: e^±60 and S·e^60 stay normal float32 numbers
QUIET = {np.float32: 60.0, np.float64: 600.0}
FIXED_MIN_ROWS = 16  # fewer rows (decoding): the key norms would cost as much as the tile
PARALLEL_MIN = 1 << 23  # below this many score·feature products (~1 ms) one thread beats two


def blocked_attention(
    q, k, v, *, block_q=None, block_k=None, workers=None, plan=None, tiles=None, **rule
):
    """z = softmax_sink(mask(cap(q·kᵀ·scale/τ) + bias))·v by blocked online softmax, for
    validated NumPy inputs.

    q (..., [H,] L, d_k), k (..., [G,] S, d_k), v (..., [G,] S, d_v), one floating dtype, G
    dividing H (``qkv.attention`` checks all this). mask: boolean, broadcastable to
    (..., H, L, S), or None. causal: None, "bottom-right" or "top-left". softcap: cap > 0 or
    None (cap(s) = cap·tanh(s/cap)). bias: floating, broadcastable to (..., H, L, S) (never
    copied whole: each tile reads its slice of the broadcast view), or None. sinks: one logit
    per query head, (H, 1, 1) or (1, 1), joining each row's denominator, or None. workers: threads
    (default: one per CPU, or one for small problems). block_q, block_k: the tile (default: the
    sizes measured fastest on this processor, ``kernels/tuning.py``). plan: the class that runs each tile
    (``_Plan`` by default; the fused kernel passes its own). tiles: what chooses the tile left
    None, called with (units, rows per unit, workers, scores) once they are known (default:
    ``tuning.tiles`` for this kernel; the fused kernel passes its own). Returns (..., [H,] L, d_v) in q's
    dtype, or None when a row that sees keys got no weight at all (every score it sees is −inf:
    an infinite input or an overflow), which the reference then decides. The settings (mask …
    sinks, ``rule``) are keywords, named and defaulted as ``checks.Problem`` holds them.
    """
    _, _, _, mask, causal, scale, temperature, softcap, bias, sinks = Problem(q, k, v, **rule)
    work, dtype = (np.float64 if q.dtype == np.float64 else np.float32), q.dtype
    if q.dtype != work:
        q, k, v = (a.astype(work) for a in (q, k, v))  # scores, softmax and sums in float32
    if bias is not None and bias.dtype != work:
        bias = np.asarray(bias, dtype=work)  # the bias as given (not broadcast): small
    L, S, d_k, d_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    nd = max(q.ndim, k.ndim, v.ndim, 3)
    q4, k4, v4 = (layout.padded(a, nd) for a in (q, k, v))  # (..., heads, length, features)
    G, r = head_groups(q4.shape[-3], k4.shape[-3], v4.shape[-3])
    batch = np.broadcast_shapes(q4.shape[:-3], k4.shape[:-3], v4.shape[:-3])
    out = np.zeros((*batch, G, r, L, d_v), dtype=work)  # (..., G, r, L, d_v)
    if out.size and S:
        units = layout.Units(
            (*batch, G),
            {
                "q": np.broadcast_to(layout.split_heads(q4, G, r), (*batch, G, r, L, d_k)),
                "k": np.broadcast_to(k4, (*batch, G, S, d_k)),  # no copy
                "v": np.broadcast_to(v4, (*batch, G, S, d_v)),  # no copy
                "mask": None
                if mask is None
                else np.broadcast_to(
                    layout.split_heads(layout.padded(np.asarray(mask), nd), G, r),
                    (*batch, G, r, L, S),
                ),
                "bias": None
                if bias is None
                else np.broadcast_to(  # a view: no copy
                    layout.split_heads(layout.padded(bias, nd), G, r), (*batch, G, r, L, S)
                ),
                "sinks": None
                if sinks is None
                else np.broadcast_to(
                    layout.sink_grid(sinks, G, r, work), (*batch, G, r)
                ),  # (..., G, r), a view
                "k_norm": None
                if bias is not None or sinks is not None or r * L < FIXED_MIN_ROWS
                else _key_norms(np.broadcast_to(k4, (*batch, G, S, d_k))),  # (..., G)
                "out": out,
            },
        )
        if workers is None:  # one per CPU, unless the work is too small to share
            small = units.count * r * L * S * (d_k + d_v) < PARALLEL_MIN
            workers = 1 if small else default_workers()
        if block_q is None or block_k is None:  # measured on this processor (kernels/tuning.py)
            chosen = (tiles or TUNED.hook)(units.count, r * L, workers, units.count * r * L * S)
            block_q, block_k = block_q or chosen.block_q, block_k or chosen.block_k
        plan = (plan or _Plan)(
            units.count,
            L,
            S,
            r,
            causal,
            block_q,
            block_k,
            workers,
            scale / temperature,
            work,
            d_k,
            d_v,
        )
        plan.softcap = softcap
        names = ("q", "k", "v", "mask", "bias", "sinks", "k_norm", "out")
        items = [(u0, u1, rows) for u0, u1 in plan.unit_chunks() for rows in plan.row_blocks()]
        workers = min(workers, len(items))
        if workers > 1:  # longest first: no thread idles late (one thread: head by head)
            items.sort(key=lambda item: -plan.cost(item[2]))

        def run(item):
            u0, u1, rows = item
            with np.errstate(invalid="ignore", over="ignore"):  # non-finite: see dispatch
                plan.tile(*(units.take(name, u0, u1) for name in names), rows)

        try:
            with single_threaded_blas():  # measured: threads over tiles beat threaded BLAS
                if workers <= 1:
                    for item in items:
                        run(item)
                else:
                    spread(run, items, workers)
        except _NoWeight:
            return None
    out = out.reshape(*batch, G * r, L, d_v)  # (..., H, L, d_v)
    out = out.reshape(out.shape[nd - max(q.ndim, k.ndim, v.ndim) :])  # drop the padding axes
    return out if out.dtype == dtype else out.astype(dtype)


# its tiles, measured on this processor (the built-in and candidate tiles are the tuner's)
TUNED = tuning.Kernel("blocked", blocked_attention)


def _key_norms(k):
    """(..., S, d) -> (...): the largest |k_j| of each unit (NaN if a key holds NaN)."""
    if k.shape[-2] == 0:
        return np.zeros(k.shape[:-2], k.dtype)
    return np.sqrt(np.einsum("...sd,...sd->...s", k, k).max(axis=-1))


class _NoWeight(Exception):
    """A row that sees keys summed no weight: the kernel's 0 would hide a NaN or an overflow."""


class _Buffers(NamedTuple):
    q: np.ndarray  # flat: the tile's queries times scale/τ
    s: np.ndarray  # flat: scores, then probabilities, in place
    pv: np.ndarray  # flat: probabilities · values


class _Plan:
    """Tile sizes and the per-tile recurrence for one call.

    A tile is u units (K/V heads) × n query rows × bk keys: n ≤ block_q rows of one head, or
    whole heads when L is short; u > 1 only when L is short (decoding), up to block_q rows in
    all; bk grows to keep the tile area when u·n is small.
    """

    def __init__(self, U, L, S, r, causal, block_q, block_k, workers, factor, dtype, d_k, d_v):
        self.U, self.L, self.S, self.r, self.factor, self.dtype = U, L, S, r, factor, dtype
        self.d_k, self.d_v = d_k, d_v
        self.offset = None if causal is None else (S - L if causal == "bottom-right" else 0)
        rows = r * L
        self.bq = max(1, min(block_q, rows))
        self.n = self.bq if L >= self.bq else max(1, self.bq // L) * L  # rows per tile
        self.n = min(self.n, rows)
        self.u = 1
        if self.n < block_q:  # short rows: stack units, but leave work for every thread
            self.u = max(1, min(block_q // self.n, -(-U // max(1, workers))))
        self.bk = max(1, min(S, max(block_k, block_q * block_k // (self.u * self.n))))
        self.buffers = {}  # thread id -> that thread's tile buffers
        self.softcap = None  # cap > 0 when the scores are soft-capped (set by the caller)
        self.log_base = 1.0  # scores in natural-log units (the fused plan uses log₂)

    def unit_chunks(self):
        return [(u0, min(u0 + self.u, self.U)) for u0 in range(0, self.U, self.u)]

    def row_blocks(self):
        """Row ranges (h0, h1, i0, i1) of the stacked (r, L) query rows: a slice of one head's
        rows (L ≥ bq) or whole heads h0..h1 (short L, e.g. one decoding token)."""
        L, r, bq = self.L, self.r, self.bq
        if L >= bq:
            return [(h, h + 1, i0, min(i0 + bq, L)) for h in range(r) for i0 in range(0, L, bq)]
        per = max(1, bq // L)
        return [(h0, min(h0 + per, r), 0, L) for h0 in range(0, r, per)]

    def cost(self, rows):
        """Keys the rows (h0, h1, i0, i1) attend to, times their count: the tile's work."""
        h0, h1, i0, i1 = rows
        return (h1 - h0) * (i1 - i0) * sum(j1 - j0 for j0, j1, _ in self.key_blocks(i0, i1))

    def key_blocks(self, i0, i1):
        """Key ranges (j0, j1, diagonal) for query rows i0..i1-1, bk keys each from key 0. Keys
        no row sees are left out; with a causal mask, a block that holds keys only some rows
        see (the diagonal, at most bq wide) is marked: the only kind that is masked, and the
        keys every row sees before it share its tile instead of making a short one."""
        S, bk = self.S, self.bk
        if self.offset is None:
            return [(j0, min(j0 + bk, S), False) for j0 in range(0, S, bk)]
        j_end = min(S, max(0, i1 + self.offset))  # past the last key any row sees
        # keys below j_full: every row sees (one row sees all the keys it sees)
        j_full = j_end if i1 - i0 == 1 else min(j_end, max(0, i0 + self.offset))
        return [
            (j0, min(j0 + bk, j_end), min(j0 + bk, j_end) > j_full) for j0 in range(0, j_end, bk)
        ]

    def start(self, q_u, rows, sink_u=None):
        """A tile's starting state: this thread's buffers, its query rows times the factor
        (scale/τ), and per row the running max m = −∞, sum ℓ = 0 and output a = 0; with sinks,
        m = the row's sink logit and ℓ = e^(sink − m) = 1 (the sink's term, rescaled like every
        other as m grows; it adds nothing to a)."""
        h0, h1, i0, i1 = rows
        u, n = q_u.shape[0], (h1 - h0) * (i1 - i0)
        buf = self._buffers()
        qs = buf.q[: u * n * self.d_k].reshape(u, n, self.d_k)
        # (u, h1-h0, i1-i0, d_k) -> (u, n, d_k): the tile's rows, times the factor
        np.multiply(
            q_u[:, h0:h1, i0:i1].reshape(u, n, self.d_k), self.factor, out=qs, casting="same_kind"
        )
        if sink_u is None:
            m = np.full((u, n), -np.inf, dtype=self.dtype)  # running max per row
            ell = np.zeros((u, n), dtype=self.dtype)  # running sum per row
        else:  # (u, h1-h0) -> (u, n): each head's logit for its i1-i0 rows, in the score units
            m = np.repeat(sink_u[:, h0:h1] * self.log_base, i1 - i0, axis=1).astype(self.dtype)
            ell = np.ones((u, n), dtype=self.dtype)
        acc = np.zeros((u, n, self.d_v), dtype=self.dtype)  # unnormalised output
        return buf, qs, m, ell, acc

    def tile(self, q_u, k_u, v_u, m_u, b_u, sink_u, kn_u, out_u, rows):
        """Run the recurrence for query rows ``rows`` of u units; write z into out_u.

        q_u (u, r, L, d_k), k_u (u, S, d_k), v_u (u, S, d_v), m_u (u, r, L, S) or None, b_u
        (u, r, L, S) or None (a broadcast view), sink_u (u, r) or None, kn_u (u,) each unit's
        largest key norm or None (no bias, sinks, or too few rows: the shifted path),
        out_u (u, r, L, d_v).
        """
        h0, h1, i0, i1 = rows
        buf, qs, m, ell, acc = self.start(q_u, rows, sink_u)
        u, n = qs.shape[:2]
        pos = np.tile(np.arange(i0, i1), h1 - h0)  # (n,) each row's query position
        fixed = kn_u is not None and self._quiet(qs, kn_u)
        for j0, j1, diagonal in self.key_blocks(i0, i1):
            hidden = self._hidden(m_u, rows, j0, j1, diagonal, pos)
            if hidden is True:
                continue  # the whole tile is masked
            s = buf.s[: u * n * (j1 - j0)].reshape(u, n, j1 - j0)
            # (u, n, d_k) @ (u, d_k, bk) -> (u, n, bk)
            np.matmul(qs, k_u[:, j0:j1].transpose(0, 2, 1), out=s)
            self._cap_and_bias(s, b_u, rows, j0, j1)
            if hidden is not None:
                np.copyto(s, -np.inf, where=hidden)
            if not fixed:  # shift by the running max; rescale what was summed before
                m_new = np.maximum(m, s.max(axis=-1))  # (u, n)
                stab = np.where(m_new == -np.inf, 0.0, m_new).astype(self.dtype)  # dead: 0
                alpha = np.exp(m - stab)  # (u, n)
                np.subtract(s, stab[..., None], out=s)
                ell *= alpha
                acc *= alpha[..., None]
                m = m_new
            np.exp(s, out=s)  # p = exp(s − m'), in place
            ell += s.sum(axis=-1)
            pv = buf.pv[: u * n * self.d_v].reshape(u, n, self.d_v)
            acc += np.matmul(s, v_u[:, j0:j1], out=pv)  # (u, n, bk) @ (u, bk, d_v)
        dead = ell == 0  # every key of the row is masked, or every score it sees is −inf
        if dead.any() and (dead & self._sees_keys(m_u, rows, pos)).any():
            raise _NoWeight
        np.divide(acc, ell[..., None], out=acc, where=~dead[..., None])
        acc[dead] = 0.0
        # (u, n, d_v) -> (u, h1-h0, i1-i0, d_v)
        out_u[:, h0:h1, i0:i1] = acc.reshape(u, h1 - h0, i1 - i0, self.d_v)

    def _cap_and_bias(self, s, b_u, rows, j0, j1):
        """In place on the tile's scores s (u, n, j1-j0): capped = cap·tanh(s/cap), then
        biased = capped + the bias tile (a slice of the broadcast view, added as it is)."""
        if self.softcap is not None:
            layout.softcap_in_place(s, self.softcap)
        if b_u is not None:
            h0, h1, i0, i1 = rows
            s4 = s.reshape(s.shape[0], h1 - h0, i1 - i0, j1 - j0)  # a view of the buffer
            np.add(s4, b_u[:, h0:h1, i0:i1, j0:j1], out=s4)  # (u or 1, h, i, bk) broadcasts

    def _quiet(self, qs, kn_u, q_norm=None):
        """Whether every score is small enough for the unshifted path, in the plan's score units
        (log₂ for the fused plan: the same magnitudes), from the bound max|q_i|·max|k_j|
        (Cauchy–Schwarz; qs holds scale/τ, kn_u each unit's largest key norm, q_norm the
        largest |q_i| when the caller has it). When it holds,
        exp(s) neither overflows nor underflows a row's largest term, so the shift by the
        running max (and the rescaling it brings) can be left out: the stabiliser stays 0, and
        the max and shift passes over every tile are saved. A softcap bounds |capped| by cap
        whatever the inputs; a NaN bound (a NaN input) keeps the shifted path."""
        if q_norm is None:
            q_norm = np.sqrt(np.einsum("und,und->un", qs, qs).max())  # (u, n) -> ()
        bound = float(q_norm) * float(kn_u.max()) * 1.01  # 1% for the rounding of the norms
        if self.softcap is not None and bound == bound:  # not NaN
            bound = min(bound, self.softcap * self.log_base)
        return bound <= QUIET[self.dtype] * self.log_base

    def _buffers(self):
        """This thread's tile buffers, made on its first tile."""
        buf = self.buffers.get(threading.get_ident())
        if buf is None:
            rows = self.u * self.n
            buf = self.buffers[threading.get_ident()] = _Buffers(
                np.empty(rows * self.d_k, self.dtype),
                np.empty(rows * self.bk, self.dtype),
                np.empty(rows * self.d_v, self.dtype),
            )
        return buf

    def _sees_keys(self, m_u, rows, pos):
        """Boolean (u or 1, n): which of the tile's rows see at least one key."""
        h0, h1, i0, i1 = rows
        j = np.arange(self.S)  # (S,)
        seen = np.ones((1, len(pos), self.S), bool)  # (1, n, S)
        if self.offset is not None:
            seen = seen & (j[None, :] <= pos[:, None] + self.offset)  # (n, S)
        if m_u is not None:
            seen = seen & m_u[:, h0:h1, i0:i1].reshape(m_u.shape[0], -1, self.S)  # (u, n, S)
        return seen.any(axis=-1)

    def _hidden(self, m_u, rows, j0, j1, diagonal, pos):
        """Boolean (u or 1, n, j1-j0) of masked scores in this tile; None if none is, True if
        all are."""
        h0, h1, i0, i1 = rows
        hidden = None
        if diagonal:  # the tile crosses the causal diagonal
            j = np.arange(j0, j1)  # (bk,)
            hidden = j[None, :] > pos[:, None] + self.offset  # (n, 1) vs (1, bk) -> (n, bk)
        if m_u is not None:
            # (u, h1-h0, i1-i0, bk) -> (u, n, bk)
            seen = m_u[:, h0:h1, i0:i1, j0:j1].reshape(m_u.shape[0], -1, j1 - j0)
            if hidden is None:
                if seen.all():
                    return None
                hidden = ~seen
            else:
                hidden = hidden | ~seen
        if hidden is not None and hidden.all():
            return True
        return hidden
