"""Ring attention on torch.distributed: exact attention when each rank holds one slice of the
sequence.

Rank r holds queries, keys and values of positions [start_r, end_r). For N ranks, N steps: at each
step a rank attends its queries to the K/V block it holds, merges that partial result into its
running (z, lse) with the log-sum-exp merge, and passes the block to rank r + 1 while receiving the
next from rank r − 1 (the transfer runs while the block is computed). After N steps every rank has
seen every block, and its z equals full attention for its queries.

    z = Σ_blocks e^(lse_b − lse)·z_b,   lse = log Σ_blocks e^(lse_b)

Backward runs the same ring: each block travels with its dK, dV accumulators and arrives home
after N passes. Causal: a block whose every key lies after every local query is skipped (so rank
r computes r + 1 blocks: the load is uneven, rank N − 1 does N times the work of rank 0).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.distributed as dist

from qkv import steps
from qkv.checks import positive_int, scale_factor, temperature_value


def ring_attention(
    q,
    k,
    v,
    *,
    causal: bool = False,
    scale=None,
    temperature: float = 1.0,
    group=None,
    chunk_bytes: int = 1 << 26,
    stats: dict | None = None,
):
    """Exact attention over the whole sequence, for this rank's slice of it.

    q (..., L_r, d_k), k (..., L_r, d_k), v (..., L_r, d_v): this rank's contiguous slice of the
    sequence, ranks in order (rank 0 first). Slices may differ in length. Returns this rank's
    slice of softmax(mask(q·kᵀ·scale/τ))·v over all ranks' keys; causal masks key positions after
    each query position. Differentiable (torch autograd) in q, k and v. Query rows are taken in
    chunks whose scores against one block fill about ``chunk_bytes``. ``stats``, when given,
    receives ``bytes_sent`` (forward) and, after a backward pass, ``bytes_sent_backward``.
    """
    group = group or dist.group.WORLD
    if q.shape[-2] != k.shape[-2] or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"q, k and v must hold the same positions of the sequence (axis -2), "
            f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1] or q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2]:
        raise ValueError(
            f"q and k must share d_k and every axis but the sequence, and so must "
            f"v; got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    factor = scale_factor(scale, q.shape[-1])
    tau = temperature_value(temperature)
    lengths = _lengths(q.shape[-2], group)
    stats = {} if stats is None else stats
    positive_int("chunk_bytes", chunk_bytes)
    plan = _Plan(bool(causal), factor, tau, lengths, group, chunk_bytes)
    return _Ring.apply(q, k, v, plan, stats)


class _Plan(NamedTuple):
    causal: bool
    scale: float
    tau: float
    lengths: list[int]
    group: object
    chunk_bytes: int


def _masked_scores(q, kb, plan, mask):
    """The reference path's steps for one block: scores ·scale ÷τ, then the mask."""
    return steps.apply_mask(
        steps.temper(steps.scale(steps.scores(q, kb), plan.scale), plan.tau), mask
    )


class _Ring(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, plan, stats):
        ring = _Neighbours(plan.group, plan.lengths, q.device)
        z = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
        lse = torch.full(q.shape[:-1], -math.inf, dtype=q.dtype, device=q.device)
        block = (k.contiguous(), v.contiguous())
        for step in range(ring.size):
            owner = ring.owner(step)
            pending = ring.pass_on(block, owner) if step < ring.size - 1 else None
            mask = ring.mask(owner, plan.causal)
            if mask is not False:  # False: no query sees a key of this block, skip it
                for rows in _row_chunks(q, block[0], plan.chunk_bytes):
                    m = None if mask is None else mask[rows]
                    masked = _masked_scores(q[..., rows, :], block[0], plan, m)
                    z_b = steps.weighted_sum(steps.softmax(masked, m), block[1], m)
                    z[..., rows, :], lse[..., rows] = steps.merge_partials(
                        z[..., rows, :], lse[..., rows], z_b, steps.logsumexp(masked, m)
                    )
            if pending is not None:
                block = pending.wait()
        ctx.save_for_backward(q, k, v, z, lse)
        ctx.plan, ctx.stats = plan, stats
        stats["bytes_sent"] = ring.bytes_sent
        return z

    @staticmethod
    def backward(ctx, dz):
        q, k, v, z, lse = ctx.saved_tensors
        plan = ctx.plan
        ring = _Neighbours(plan.group, plan.lengths, q.device)
        D = (dz * z).sum(-1, keepdim=True)  # (..., L, 1): Σ_c dz·z, the softmax's row term
        c = plan.scale / plan.tau
        dq = torch.zeros_like(q)
        block = (k.contiguous(), v.contiguous(), torch.zeros_like(k), torch.zeros_like(v))
        for step in range(ring.size):
            owner = ring.owner(step)
            kb, vb, dk, dv = block
            mask = ring.mask(owner, plan.causal)
            if mask is not False:
                for rows in _row_chunks(q, kb, plan.chunk_bytes):
                    qc, dzc = q[..., rows, :], dz[..., rows, :]
                    m = None if mask is None else mask[rows]
                    s = _masked_scores(qc, kb, plan, m)  # (..., rows, S_b)
                    p = torch.exp(s - lse[..., rows, None])  # this block's final weights
                    dv = dv + p.mT @ dzc  # (..., S_b, rows) @ (..., rows, d_v)
                    ds = p * (dzc @ vb.mT - D[..., rows, :])  # (..., rows, S_b)
                    dq[..., rows, :] += c * (ds @ kb)  # s = c·q·kᵀ with c = scale/τ
                    dk = dk + c * (ds.mT @ qc)
            # after N passes the block and its gradients are back with their owner
            block = (
                (kb, vb, dk, dv)
                if ring.size == 1
                else ring.pass_on(block[:2] + (dk, dv), owner).wait()
            )
        ctx.stats["bytes_sent_backward"] = ring.bytes_sent
        return dq, block[2], block[3], None, None


def _row_chunks(q, kb, budget: int) -> list[slice]:
    """Query rows in chunks whose scores against ``kb`` take about ``budget`` bytes, so a rank
    never holds a whole (L, S_b) block of scores when slices are long."""
    L = q.shape[-2]
    per_row = max(1, math.prod(q.shape[:-2]) * kb.shape[-2] * q.element_size())
    step = max(1, budget // per_row)
    return [slice(a, min(a + step, L)) for a in range(0, L, step)] or [slice(0, 0)]


def _lengths(n: int, group) -> list[int]:
    """Every rank's slice length, in rank order."""
    device = "cuda" if dist.get_backend(group) == "nccl" else "cpu"
    sizes = [
        torch.zeros(1, dtype=torch.int64, device=device) for _ in range(dist.get_world_size(group))
    ]
    dist.all_gather(sizes, torch.tensor([n], dtype=torch.int64, device=device), group=group)
    return [int(s) for s in sizes]


class _Neighbours:
    """This rank's place in the ring: who sends to it, whom it sends to, which block it holds."""

    def __init__(self, group, lengths: list[int], device):
        self.group = group
        self.device = device
        self.size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.lengths = lengths
        self.starts = [sum(lengths[:r]) for r in range(self.size)]
        self.next = dist.get_global_rank(group, (self.rank + 1) % self.size)
        self.prev = dist.get_global_rank(group, (self.rank - 1) % self.size)
        self.bytes_sent = 0

    def owner(self, step: int) -> int:
        """The rank whose K/V block this rank holds at ``step``."""
        return (self.rank - step) % self.size

    def mask(self, owner: int, causal: bool):
        """Mask of this rank's queries against ``owner``'s keys: None when all are visible,
        False when none are (or either slice is empty: T < N leaves some ranks none), else a
        boolean (L_r, S_owner) matrix (True = may attend)."""
        q0, q1 = self.starts[self.rank], self.starts[self.rank] + self.lengths[self.rank]
        k0, k1 = self.starts[owner], self.starts[owner] + self.lengths[owner]
        if q1 == q0 or k1 == k0:
            return False
        if not causal or k1 - 1 <= q0:
            return None
        if k0 > q1 - 1:
            return False
        i = torch.arange(q0, q1, device=self.device)[:, None]  # global query positions
        j = torch.arange(k0, k1, device=self.device)[None, :]  # global key positions
        return j <= i

    def pass_on(self, tensors, owner: int):
        """Send ``tensors`` (owned by ``owner``) to the next rank and receive the previous rank's
        block; returns a handle whose ``wait()`` gives the received tensors. Empty blocks are
        neither sent nor received (both ends know every slice's length)."""
        incoming = (owner - 1) % self.size
        bufs = []
        ops_ = []
        for t in tensors:
            shape = (*t.shape[:-2], self.lengths[incoming], t.shape[-1])
            buf = torch.empty(shape, dtype=t.dtype, device=t.device)
            bufs.append(buf)
            if t.numel():
                ops_.append(dist.P2POp(dist.isend, t.contiguous(), self.next, self.group))
                self.bytes_sent += t.numel() * t.element_size()
            if buf.numel():
                ops_.append(dist.P2POp(dist.irecv, buf, self.prev, self.group))
        requests = dist.batch_isend_irecv(ops_) if ops_ else []
        return _Pending(requests, tuple(bufs))


class _Pending:
    def __init__(self, requests, bufs):
        self.requests, self.bufs = requests, bufs

    def wait(self):
        for r in self.requests:
            r.wait()
        return self.bufs
