"""What ``qkv bench`` runs: the peers, the configurations, timing, and memory in a child process.

A configuration is (T, heads, d, causal, decode, width): prefill attends T queries to T keys;
decode attends one query (the newest token) to a cache of T keys. Inputs are float32,
(heads, L, d), N(0,1) with q and k times ``width`` (4: scores that need the running max).
Every peer computes the same attention on the same arrays:

    qkv auto         qkv.attention(...)                       what a caller gets by default
    qkv fused        qkv.attention(..., backend="fused")      one compiled pass per tile (numba)
    qkv blocked      qkv.attention(..., backend="blocked")    blocked online softmax, NumPy
    qkv reference    qkv.attention(..., backend="reference")  every step kept, NumPy
    naive numpy      the whole scores matrix, then softmax, then ·V (what one writes by hand)
    torch sdpa       F.scaled_dot_product_attention on 4-D inputs (its fused kernel)
    torch math       the same call forced onto torch's unfused math kernel
    qkv auto·torch   qkv.attention on torch tensors (auto dispatch in front of SDPA)
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

from qkv import masks
from qkv.attention import attention

PEERS = (
    "qkv auto",
    "qkv fused",
    "qkv blocked",
    "qkv reference",
    "naive numpy",
    "torch sdpa",
    "torch math",
    "qkv auto·torch",
)
TORCH_PEERS = ("torch sdpa", "torch math", "qkv auto·torch")
ERROR_ROWS = 64  # query rows per head checked against the float64 reference
RERUN = 0.05  # seconds: peers faster than this get an untimed run before each timed one


@dataclass(frozen=True)
class Config:
    T: int  # keys (and queries, unless decoding)
    heads: int
    d: int  # d_k = d_v
    causal: bool
    decode: bool  # one query against a cache of T keys
    width: float = 1.0  # q and k drawn from N(0, width²)

    @property
    def L(self) -> int:
        return 1 if self.decode else self.T

    @property
    def flops(self) -> float:
        """4·L·S·d per head (two matmuls); half of that for causal prefill."""
        full = 4.0 * self.L * self.T * self.d * self.heads
        return full / 2 if self.causal and not self.decode else full

    @property
    def kv_bytes(self) -> int:
        """Bytes of K and V (float32): what one decoding step must read at least once."""
        return 2 * self.heads * self.T * self.d * 4

    @property
    def label(self) -> str:
        kind = "decode" if self.decode else ("causal" if self.causal else "full")
        wide = "" if self.width == 1 else f" q,k×{self.width:g}"
        return f"T={self.T} h={self.heads} d={self.d} {kind}{wide}"


def unavailable(chosen) -> dict[str, str]:
    """The chosen peers that cannot run here, each with the reason (a missing library)."""
    from qkv.kernels import fused

    why = None if have_torch() else "torch is not installed (pip install 'qkv[torch]')"
    out = {p: why for p in chosen if p in TORCH_PEERS and why}
    if "qkv fused" in chosen and not fused.available():
        out["qkv fused"] = "numba is not installed (pip install 'qkv[fast]')"
    return out


def have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def inputs(cfg: Config, seed: int = 0):
    """q (heads, L, d), k and v (heads, T, d), float32, from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((cfg.heads, cfg.L, cfg.d), dtype=np.float32)
    k = rng.standard_normal((cfg.heads, cfg.T, cfg.d), dtype=np.float32)
    if cfg.width != 1:
        q *= np.float32(cfg.width)
        k *= np.float32(cfg.width)
    v = rng.standard_normal((cfg.heads, cfg.T, cfg.d), dtype=np.float32)
    return q, k, v


def scores_bytes(cfg: Config, peer: str) -> int:
    """Rough peak bytes a peer holds for its (heads, L, T) score-sized arrays."""
    n = cfg.heads * cfg.L * cfg.T
    per_element = {"qkv reference": 6 * 4 + 1, "naive numpy": 2 * 4 + 1, "torch math": 3 * 4 + 1}
    return n * per_element.get(peer, 0)


def make_runner(peer: str, cfg: Config, q, k, v):
    """A no-argument function that computes the attention output with ``peer``."""
    causal = cfg.causal or cfg.decode  # decoding: bottom-right causal, i.e. every key
    if peer in ("qkv auto", "qkv fused", "qkv blocked", "qkv reference"):
        backend = peer.split()[1]
        return lambda: attention(q, k, v, causal=causal, backend=backend)
    if peer == "naive numpy":
        return lambda: _naive(q, k, v, causal and not cfg.decode)
    import torch
    import torch.nn.functional as F

    tq, tk, tv = (torch.from_numpy(a)[None] for a in (q, k, v))  # (1, heads, L, d): fused kernel
    is_causal = cfg.causal and not cfg.decode  # torch aligns top-left: a decode step needs none
    if peer == "torch sdpa":
        return lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=is_causal)
    if peer == "torch math":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def math_kernel():
            with sdpa_kernel(SDPBackend.MATH):
                return F.scaled_dot_product_attention(tq, tk, tv, is_causal=is_causal)

        return math_kernel
    if peer == "qkv auto·torch":
        return lambda: attention(tq, tk, tv, causal=causal)
    raise ValueError(f"peer must be one of {PEERS}, got {peer!r}")


def _naive(q, k, v, causal):
    """The scores matrix written out: softmax(q·kᵀ/√d)·v in float32 (a baseline, no checks)."""
    s = q @ np.swapaxes(k, -1, -2)  # (heads, L, d) @ (heads, d, T) -> (heads, L, T)
    s *= 1.0 / math.sqrt(q.shape[-1])
    if causal:
        s[:, ~masks.causal(q.shape[-2], k.shape[-2])] = -np.inf
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s @ v  # (heads, L, T) @ (heads, T, d) -> (heads, L, d)


def error_rows(cfg: Config) -> np.ndarray:
    """The query rows checked for error: up to ERROR_ROWS spread evenly, first and last kept."""
    return np.unique(np.linspace(0, cfg.L - 1, min(cfg.L, ERROR_ROWS)).round().astype(int))


def float64_reference(cfg: Config, q, k, v) -> np.ndarray:
    """The float64 reference output at ``error_rows`` (heads, rows, d), without the T×T matrix."""
    rows = error_rows(cfg)
    mask = None
    if cfg.causal or cfg.decode:
        mask = masks.causal(cfg.L, cfg.T)[rows]  # (rows, T), bottom-right
    q64, k64, v64 = (a.astype(np.float64) for a in (q[:, rows], k, v))
    return attention(q64, k64, v64, mask=mask, backend="reference")


def max_error(out, cfg: Config, expected) -> float:
    out = out.detach().numpy() if hasattr(out, "detach") else np.asarray(out)
    out = out.reshape(cfg.heads, cfg.L, cfg.d)[:, error_rows(cfg)]
    return float(np.abs(out.astype(np.float64) - expected).max())


def time_peers(
    runners: dict,
    *,
    min_time: float,
    min_repeats: int = 3,
    max_repeats: int = 15,
    settle: float = 0.25,
    on_step=lambda: None,
) -> tuple[dict, dict, dict]:
    """(median seconds, one output, best seconds) per peer. A warm-up round, then timed rounds
    that run every peer once each, so load from elsewhere falls on all peers alike, until the
    slowest has min_time in total. Each run follows a pause of ``settle`` seconds, in which the
    previous peer's BLAS and OpenMP threads stop spinning; a peer faster than RERUN seconds runs
    once untimed after the pause, so its own threads are awake, as in a loop of decoding steps
    (judged by its warm-up, or by its first timed run when the warm-up paid a one-time cost)."""
    outputs, warm = {}, {}
    for name, fn in runners.items():
        time.sleep(settle)
        t0 = time.perf_counter()
        outputs[name] = fn()
        warm[name] = time.perf_counter() - t0
        on_step()
    times: dict[str, list[float]] = {name: [] for name in runners}
    while times:
        for name, fn in runners.items():
            time.sleep(settle)
            rerun = warm[name] < RERUN
            if rerun:
                fn()
            t0 = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - t0
            if not rerun and elapsed < RERUN:
                # the warm-up paid a one-time cost (compiled code loaded, a first allocation):
                # this fast run was measured cold after the pause, so it does not count, and
                # from now on the peer gets its untimed run like the other fast ones
                warm[name] = elapsed
                continue
            times[name].append(elapsed)
        n = min(len(t) for t in times.values())
        if n >= max_repeats or n >= min_repeats and max(map(sum, times.values())) >= min_time:
            break
    for _ in runners:
        on_step()
    medians = {name: statistics.median(t) for name, t in times.items()}
    return medians, outputs, {name: min(t) for name, t in times.items()}


def gemm_peak(n: int = 4096, repeats: int = 3) -> float:
    """GFLOP/s of NumPy float32 matmul at n³ (the machine's practical peak), the best of
    repeats: other work on the machine only ever slows a run down."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    out = np.empty((n, n), dtype=np.float32)
    np.matmul(a, b, out=out)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.matmul(a, b, out=out)
        times.append(time.perf_counter() - t0)
    return 2.0 * n**3 / min(times) / 1e9


def copy_bandwidth(n_bytes: int = 1 << 28, repeats: int = 5) -> float:
    """GB/s of ``np.copyto`` between two float32 arrays of n_bytes each, counted as STREAM
    counts a copy (bytes read + bytes written), best of repeats: the memory speed a kernel
    that reads K and V once can approach."""
    src = np.ones(n_bytes // 4, dtype=np.float32)
    dst = np.zeros_like(src)
    np.copyto(dst, src)  # warm-up: pages mapped
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best / 1e9


# ---- peak extra memory, in a fresh process per configuration ---------------------------------


def measure_memory(
    jobs: list[tuple[Config, list[str]]], *, threads: int | None = None, timeout: float = 900.0
) -> list[dict]:
    """Peak extra resident memory (bytes) of one run of each peer, for each configuration,
    measured in one child process (so this process's caches and warm-ups do not count).

    For each configuration the child makes fresh inputs; for each peer it resets the kernel's
    high-water mark (/proc/self/clear_refs), runs the peer once and reports VmHWM minus the
    resident size just before the run. ``threads``: the BLAS and OpenMP thread count the child
    is told (it inherits this process's CPU affinity).
    """
    payload = json.dumps([[asdict(cfg), peers] for cfg, peers in jobs])
    code = f"from qkv.bench.peers import _child; _child({payload!r})"
    try:
        # a fixed mmap threshold: every large block is mapped on allocation and unmapped on
        # free, so a peer cannot reuse pages an earlier peer left in the heap unseen
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
        if threads is not None:
            env |= {k: str(threads) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
            env=env,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as e:
        reason = getattr(e, "stderr", None) or str(e)
        return [{p: None for p in peers} | {"error": reason.strip()[-300:]} for _, peers in jobs]


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def _child(payload: str) -> None:
    jobs = [(Config(**cfg), peers) for cfg, peers in json.loads(payload)]
    if any(p in TORCH_PEERS for _, peers in jobs for p in peers):
        import torch  # noqa: F401  (loaded before any baseline is read)
    from qkv.kernels import fused

    if fused.available():  # numba and its compiled code loaded before any baseline is read
        x = np.ones((1, 40, 4), np.float32)
        fused.fused_attention(x, x, x, causal="bottom-right")
        fused.fused_attention(x[:, :1], x, x, causal="bottom-right")
    results = []
    for cfg, peers in jobs:
        q, k, v = inputs(cfg)
        result: dict[str, int | str] = {}  # peer: peak bytes, or error: why not measured
        for peer in peers:
            run = make_runner(peer, cfg, q, k, v)
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # reset VmHWM to the current resident size
            except OSError:
                result["error"] = "cannot reset the high-water mark: figures include earlier runs"
            before = _status_kib("VmRSS")
            out = run()
            result[peer] = max(0, _status_kib("VmHWM") - before) * 1024
            del out
        results.append(result)
        del q, k, v
    print(json.dumps(results))
