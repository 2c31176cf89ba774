"""Tile sizes chosen by measuring on this processor, once, and kept in the user's cache.

The blocked and fused kernels run (block_q query rows × block_k keys) tiles, and the strip
kernel tiles of block_q rows (its own candidates: ``fused.strips_kernel``). Each names itself
to the tuner as a ``Kernel``: ``blocked.TUNED``, ``fused.tuned()``. Which size is
fastest depends on the processor (its caches, its vector width, its BLAS kernel), so on first
use with a problem big enough for tiles to matter, ``choice`` times every candidate on a
fixed problem (H = 1, T = 4096, d = 64, float32, full and causal, one thread, CPU time so
that load from other processes counts little), keeps the fastest, and writes the result to

    $XDG_CACHE_HOME/qkv/tiles.json   (or ~/.cache/qkv/tiles.json)

keyed by the processor (``kernels/processor.py``: model, signature, core count), the NumPy
and numba versions and the tuning problem. A file that cannot be read, does not parse, or was
written for another processor, other versions or another problem is rejected and measured
again. Measuring takes a few seconds: every candidate runs once, the fastest quarter twice
more (the best of its runs counts), and the search stops at ``BUDGET_S``.

``QKV_TUNE=off`` (the test suite sets it) skips all this and uses each kernel's built-in
tiles (``Kernel.built_in``: ``DEFAULT``, or the strip kernel's ``STRIP_ROWS``); ``forced``
imposes tiles for a block of code (the contract suite runs under several); ``reset`` deletes
the file (``qkv bench --retune``); ``qkv bench --tune`` prints what was chosen and why.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from qkv.kernels import processor

FORMAT = 1  # the file's layout; a file of another format is measured again
# the kernels' inner loops: raised when they change, so tiles chosen for the old ones are
# measured again rather than kept
KERNELS = 6


@dataclass(frozen=True, order=True)
class Tiles:
    block_q: int  # query rows per tile
    block_k: int  # keys per tile

    def __post_init__(self):
        for name in ("block_q", "block_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1 << 16:
                raise ValueError(f"{name} must be an integer in [1, 65536], got {value!r}")

    def __str__(self) -> str:
        return f"{self.block_q}×{self.block_k}"


DEFAULT = Tiles(256, 512)  # without measuring: 256 rows keep causal waste low, 512 keys fill L2
# (block_q, block_k): float32 score tiles of 128 KiB to 2 MiB, inside L2 to several times it
CANDIDATES = tuple(
    Tiles(q, k)
    for q, k in (
        (64, 1024),
        (64, 2048),
        (128, 256),
        (128, 512),
        (128, 1024),
        (128, 2048),
        (256, 256),
        (256, 512),
        (256, 1024),
        (256, 2048),
        (512, 256),
        (512, 512),
        (512, 1024),
    )
)
MIN_SCORES = 1 << 22  # smaller calls take DEFAULT: tiles matter little and must not wait
BUDGET_S = 4.0  # seconds of measuring at most, per kernel (on an idle machine ~3)
PROBLEM = {"heads": 1, "T": 4096, "d": 64}
OFF = ("off", "0", "no", "false")
ON = ("on", "1", "yes", "true", "")


@dataclass(frozen=True)
class Kernel:
    """A kernel whose tiles are measured: its name in the cache, the function timed to measure
    it (called as ``measure`` says), and its own candidates and built-in tiles (None: CANDIDATES
    and DEFAULT, as they are when asked). timer: for a kernel measured on a problem of its
    own, ``timer(run)`` -> a function of the tiles giving CPU seconds, instead of ``measure``'s
    attention problem; problem: what it times, in words; describe: its choices in words where
    they are not tile sizes."""

    name: str
    run: Callable = field(compare=False, repr=False)
    candidates: tuple[Tiles, ...] | None = None
    default: Tiles | None = None
    timer: Callable[[Callable], Callable[[Tiles], float]] | None = field(
        default=None, compare=False, repr=False
    )
    problem: str | None = None
    describe: Callable[[Tiles], str] | None = field(default=None, compare=False, repr=False)

    @property
    def measured_on(self) -> str:
        """The problem its tiles are measured on, in words."""
        return self.problem or problem_text()

    @property
    def choices(self) -> tuple[Tiles, ...]:
        """The tiles measured for it."""
        return self.candidates or CANDIDATES

    @property
    def built_in(self) -> Tiles:
        """Its tiles without measuring (tuning off, a small call)."""
        return self.default or DEFAULT

    def hook(self, units: int, rows: int, workers: int, scores: int) -> Tiles:
        """Its tiles for one call, as ``blocked_attention``'s ``tiles=`` asks: ``tiles`` on the
        call's scores (the units, rows and workers do not change them)."""
        return tiles(self, scores)

    def label(self, t: Tiles) -> str:
        """A choice in words (``qkv bench --tune``): the tiles, or its own ``describe``."""
        return self.describe(t) if self.describe else str(t)


_FORCED: contextvars.ContextVar[Tiles | None] = contextvars.ContextVar("qkv_tiles", default=None)


@dataclass
class Choice:
    """The tiles a kernel uses here, and why."""

    kernel: str
    tiles: Tiles
    source: str  # "measured now", "cache", "default (QKV_TUNE=off)"
    table: list = field(
        default_factory=list
    )  # [(Tiles, CPU seconds of full + causal)], fastest first
    spent_s: float = 0.0  # seconds the measuring took
    note: str = ""  # e.g. why the cache was rejected, or could not be written

    def as_json(self, problem: str) -> dict:
        return {
            **asdict(self.tiles),
            "problem": problem,
            "spent_s": round(self.spent_s, 3),
            "table": [{**asdict(t), "cpu_s": s} for t, s in self.table],
        }


def enabled() -> bool:
    """Whether tiles are measured (QKV_TUNE unset or on) rather than the defaults (off)."""
    value = os.environ.get("QKV_TUNE", "").strip().lower()
    if value not in OFF + ON:
        raise ValueError(f"QKV_TUNE must be 'on' or 'off', got {os.environ['QKV_TUNE']!r}")
    return value not in OFF


def tiles(kernel: Kernel, scores: int) -> Tiles:
    """The tiles for one call of ``kernel`` on ``scores`` scores (batch·heads·L·S, broadcast):
    forced, built in (a small call, tuning off), or ``choice``'s (measured the first time)."""
    forced = _FORCED.get()
    if forced is not None:
        return forced
    if scores < MIN_SCORES or not enabled():
        return kernel.built_in
    return choice(kernel).tiles


@contextlib.contextmanager
def forced(chosen: Tiles | None):
    """Within the block, every blocked and fused tile is ``chosen`` (None: as usual)."""
    token = _FORCED.set(chosen)
    try:
        yield chosen
    finally:
        _FORCED.reset(token)


def forced_or(default: Tiles) -> Tiles:
    """The tiles ``forced`` imposes here, else ``default``."""
    return _FORCED.get() or default


def cache_path() -> Path:
    """Where the measurements are kept: $XDG_CACHE_HOME/qkv/tiles.json, else ~/.cache/qkv."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "qkv" / "tiles.json"


_lock = threading.Lock()
_chosen: dict[str, Choice] = {}  # kernel name -> its choice, once known in this process


def choice(kernel: Kernel, *, budget_s: float | None = None) -> Choice:
    """The tiles for ``kernel``: from this process's memory, else the cache file, else measured
    now among its choices (and written to the file); its built-in tiles when tuning is off."""
    name = kernel.name
    if not enabled():
        return Choice(name, kernel.built_in, "default (QKV_TUNE=off)")
    with _lock:
        if name in _chosen:
            return _chosen[name]
        path = cache_path()
        entries, note = _read(path)
        entry = entries.get(name)
        if entry is not None:
            found = _from_entry(name, entry)
            same = isinstance(entry, dict) and entry.get("problem") == kernel.measured_on
            if found is not None and found.tiles in kernel.choices and same:
                _chosen[name] = found
                return found
            if found is None:
                note, entries = "the cache's entry did not parse: measured again", {}
            elif not same:  # its timer's problem changed since: this entry alone is measured again
                note = "the cache's entry was measured on another problem: measured again"
            else:  # the kernel's choices changed since: this entry alone is measured again
                note = f"the cache's {found.tiles} is not among the choices: measured again"
        t0 = time.perf_counter()
        budget_s = BUDGET_S if budget_s is None else budget_s
        table = measure(kernel.run, kernel.choices, budget_s=budget_s, timer=kernel.timer)
        found = Choice(name, table[0][0], "measured now", table, time.perf_counter() - t0, note)
        entries[name] = found.as_json(kernel.measured_on)
        found.note = "; ".join(n for n in (note, _write(path, entries)) if n)
        _chosen[name] = found
        return found


def forget() -> None:
    """Forget what this process knows (the next call reads the cache file again)."""
    with _lock:
        _chosen.clear()


def reset() -> None:
    """Forget the measurements: delete the cache file and what this process knows."""
    with _lock:
        _chosen.clear()
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            cache_path().unlink()


def measure(run, candidates, *, budget_s: float, rounds: int = 3, timer=None, **problem) -> list:
    """[(Tiles, seconds)] fastest first: CPU seconds of one full and one causal attention of
    ``run`` (q, k, v, causal=, scale=, workers=1, block_q=, block_k=) on the tuning problem
    (or the seconds of ``timer(run)``, its problem made once), the best of up to ``rounds``
    rounds; after the first round only the fastest quarter stays."""
    if timer is not None:
        return _rounds(timer(run), candidates, budget_s, rounds)
    size = {**PROBLEM, **problem}
    rng = np.random.default_rng(0)
    q, k, v = (
        rng.standard_normal((size["heads"], size["T"], size["d"]), dtype=np.float32)
        for _ in range(3)
    )
    scale = 1.0 / np.sqrt(size["d"])

    def timed(t: Tiles) -> float:
        t0 = time.thread_time()  # this thread's CPU time: the kernel runs here (workers=1)
        for causal in (None, "bottom-right"):
            run(
                q, k, v, causal=causal, scale=scale, workers=1, block_q=t.block_q, block_k=t.block_k
            )
        return time.thread_time() - t0

    return _rounds(timed, candidates, budget_s, rounds)


def _rounds(timed, candidates, budget_s: float, rounds: int) -> list:
    """``measure``'s rounds: every candidate timed once, then the fastest quarter again."""
    timed(candidates[0])  # warm-up: compiled code loaded, buffers and pages touched
    deadline = time.perf_counter() + budget_s
    best: dict[Tiles, float] = {}
    alive = list(candidates)
    for r in range(rounds):
        for t in alive:
            if best and time.perf_counter() > deadline:
                break
            best[t] = min(best.get(t, np.inf), timed(t))
        if time.perf_counter() > deadline:
            break
        if r == 0:
            alive = sorted(alive, key=lambda t: best.get(t, np.inf))[: max(2, len(alive) // 4)]
    return sorted(best.items(), key=lambda item: item[1])


def _key() -> dict:
    try:
        import numba

        numba_version = numba.__version__
    except ImportError:
        numba_version = None
    return {
        "format": FORMAT,
        "kernels": KERNELS,
        "problem": problem_text(),  # measured on another problem: measured again
        "processor": processor.current().key,
        "numpy": np.__version__,
        "numba": numba_version,
    }


def _read(path: Path) -> tuple[dict, str]:
    """The file's kernel entries ({} when there is none or it is rejected) and why not."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, NotADirectoryError):
        return {}, ""
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return {}, f"rejected {path} ({type(e).__name__}): measured again"
    if not isinstance(data, dict) or not isinstance(data.get("kernels"), dict):
        return {}, f"rejected {path} (not a tile cache): measured again"
    if data.get("key") != _key():
        return (
            {},
            f"rejected {path} (another processor, other versions or older kernels): measured again",
        )
    return data["kernels"], ""


def _from_entry(kernel: str, entry) -> Choice | None:
    try:
        chosen = Tiles(entry["block_q"], entry["block_k"])
        table = [
            (Tiles(row["block_q"], row["block_k"]), float(row["cpu_s"])) for row in entry["table"]
        ]
        return Choice(kernel, chosen, "cache", table, float(entry["spent_s"]))
    except (KeyError, TypeError, ValueError):
        return None


def _write(path: Path, entries: dict) -> str:
    """Write the file atomically (a temporary file renamed); '' or why it could not be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": _key(), "kernels": entries}, indent=1))
        os.replace(tmp, path)
    except OSError as e:
        return f"could not write {path}: {e.strerror or e}"
    return ""


def problem_text() -> str:
    return (
        f"H={PROBLEM['heads']} T={PROBLEM['T']} d={PROBLEM['d']} float32, full + causal, "
        "1 thread, CPU time"
    )
