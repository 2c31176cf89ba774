"""Heatmaps that zoom: what the page, the notebook widget and the HTML export draw of one head of
a long text, computed from any trace's readers (``qkv.readers``: a ``LazyTrace`` computes only
the rows asked for, an eager ``Trace`` slices its arrays) at the size that is shown.

Every function takes ``trace`` (one layer's trace) and ``head`` (the query head; None for a
trace without a head axis) and returns a ``Payload``: a small JSON ``header`` and one NumPy
array, ``data``. ``Payload.to_bytes()`` is what a server sends as application/octet-stream;
``Payload.buffers()`` gives an anywidget message (the header as JSON, the array as a buffer);
``unpack(bytes)`` reads one back. In JavaScript, ``web/static/zoomdata.js`` reads them
(``unpack`` for bytes, ``fromBuffers`` for a widget message) and ``web/static/zoom.js`` draws
them from any source object with overview(), window(r0, r1, c0, c1), row(q), search(text).

    overview(trace, head, size=256)       the step max-pooled to at most size × size cells, one
                                          byte a cell (``encode``), header: factor, legend
    window(trace, head, r0, r1, c0, c1)   rows r0:r1 × keys c0:c1 as exact float32, or max-pooled
                                          by ``factor`` when past ``max_cells``; token labels
    row(trace, head, q, width=1024, k=8)  query q's weights over every key, max-pooled to at most
                                          ``width`` (float32), its top ``k`` keys named
    search(tokens, text)                  the positions whose token matches ``text`` (a JSON dict)
    thumbnails(layers, size=64)           every head of every layer max-pooled to ≤ size × size,
                                          one byte a cell: (n_layers, n_heads, R, K)
                                          (``pooled_heads``: the same as float64)
    at_temperature(trace, tau)            the trace recomputed at τ (lazy stays lazy)

Overview bytes (``encode``): for ``weights`` byte = round(255·√w) (so w ≈ (byte/255)², and a
weight of 0.001 still shows); for the score steps byte 0 means no finite value (masked, −∞ or
NaN) and 1…255 run linearly from the header's ``lo`` to ``hi``. Max-pooling keeps the largest
number of each block, so one sharp weight stays visible; ``legend`` says so in words.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field

import numpy as np

from qkv.explain.tokens import labels, select_label, visible
from qkv.steps import ROWS, entropy

OVERVIEW = 256  # default overview size (cells a side)
MAX_OVERVIEW = 1024
MAX_WINDOW_CELLS = 128 * 128  # exact float32 cells a window sends (64 KB)
ROW_WIDTH = 1024  # default width of the selected row's strip
MAX_ROW_WIDTH = 8192
MAX_TOP = 64
THUMB = 64  # thumbnails: at most 64 × 64 cells a head
MAX_HITS = 200  # positions a search names
SCORE_STEPS = ("scores", "scaled", "tempered", "capped", "biased", "masked", "weights")
MAGIC = b"QKVZ"


@dataclass
class Payload:
    """A JSON ``header`` (shape, dtype, encoding and what the view needs besides) and ``data``."""

    header: dict
    data: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))

    def __post_init__(self):
        self.data = np.ascontiguousarray(self.data)
        if self.data.dtype.byteorder == ">":
            self.data = self.data.astype(self.data.dtype.newbyteorder("<"))
        self.header = {
            **self.header,
            "shape": list(self.data.shape),
            "dtype": self.data.dtype.name,
        }

    def to_bytes(self) -> bytes:
        """MAGIC, the header's length (uint32, little-endian), the header as UTF-8 JSON padded
        with spaces to a multiple of 8 bytes, then the array's bytes (little-endian, C order)."""
        head = json.dumps(self.header, separators=(",", ":"), allow_nan=False).encode()
        head += b" " * (-(len(head) + 8) % 8)
        return MAGIC + struct.pack("<I", len(head)) + head + self.data.tobytes()

    def buffers(self) -> tuple[dict, list[bytes]]:
        """(the header, [the array's bytes]): an anywidget message and its buffers."""
        return self.header, [self.data.tobytes()]


def unpack(raw: bytes) -> Payload:
    """The ``Payload`` that ``to_bytes`` wrote; a ValueError for anything else."""
    if len(raw) < 8 or raw[:4] != MAGIC:
        raise ValueError(f"a zoom payload starts with {MAGIC!r}, got {bytes(raw[:4])!r}")
    (n,) = struct.unpack("<I", raw[4:8])
    if 8 + n > len(raw):
        raise ValueError(f"the header says {n} bytes, but only {len(raw) - 8} follow")
    header = json.loads(raw[8 : 8 + n])
    dtype, shape = np.dtype(header["dtype"]), tuple(header["shape"])
    body = raw[8 + n :]
    if len(body) != math.prod(shape) * dtype.itemsize:
        raise ValueError(f"{shape} {dtype} needs {math.prod(shape) * dtype.itemsize} bytes, "
                         f"got {len(body)}")  # fmt: skip
    return Payload(header, np.frombuffer(body, dtype=dtype.newbyteorder("<")).reshape(shape))


# ---- checks ----------------------------------------------------------------------------------


def _int(name: str, value, lo: int, hi: int) -> int:
    """``value`` as an int in [lo, hi]; a ValueError naming the range otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    return int(value)


def _step(trace, step: str) -> str:
    if step not in SCORE_STEPS or step not in trace.steps:
        have = [s for s in SCORE_STEPS if s in trace.steps]
        raise ValueError(f"step must be one of {have}, got {step!r}")
    return step


def _sizes(trace) -> tuple[int, int]:
    return trace.settings["L"], trace.settings["S"]


def key_labels(trace) -> list[str]:
    """Labels of the keys (``explain.tokens.labels``): the trace's key tokens, else its tokens
    (self-attention), else positions."""
    S = trace.settings["S"]
    return labels(trace.key_tokens or trace.tokens, S)


def query_labels(trace) -> list[str]:
    return labels(trace.tokens, trace.settings["L"])


# ---- the views -------------------------------------------------------------------------------


def encode(values: np.ndarray, step: str) -> tuple[np.ndarray, dict]:
    """Numbers -> one byte each, and the header fields that say how (see the module docstring)."""
    v = np.asarray(values, dtype=np.float64)
    if step == "weights":
        b = np.rint(255 * np.sqrt(np.clip(np.nan_to_num(v, nan=0.0), 0, 1)))
        return b.astype(np.uint8), {"encoding": "uint8 sqrt", "lo": 0.0, "hi": 1.0}
    finite = np.isfinite(v)
    lo = float(v[finite].min()) if finite.any() else 0.0
    hi = float(v[finite].max()) if finite.any() else 0.0
    span = hi - lo if hi > lo else 1.0
    b = np.where(finite, 1 + np.rint(254 * (np.where(finite, v, lo) - lo) / span), 0)
    return b.astype(np.uint8), {"encoding": "uint8 linear", "lo": lo, "hi": hi}


def legend(step: str, fr: int, fk: int) -> str:
    """What the legend says about the cells: pooled or not, by how much, and how."""
    what = "weight" if step == "weights" else f"{step} value"
    if fr == fk == 1:
        return f"every cell is one {what} (no pooling)"
    block = f"{fr} {'query' if fr == 1 else 'queries'} × {fk} {'key' if fk == 1 else 'keys'}"
    return (
        f"max-pooled: each cell shows the largest {what} of {block}, so one sharp weight "
        "stays visible; zoom in for the exact numbers"
    )


def overview(trace, head: int | None = None, size: int = OVERVIEW, *, step: str = "weights"):
    """One head's ``step`` max-pooled to at most size × size cells (``Trace.pooled``), one byte a
    cell. Header: L, S, step, factor [queries, keys] a cell, encoding, lo, hi, legend."""
    size = _int("size", size, 1, MAX_OVERVIEW)
    step = _step(trace, step)
    p = trace.pooled(size, head=head, step=step)
    fr = int(p.rows[1] - p.rows[0]) if len(p.rows) > 1 else 1
    fk = int(p.keys[1] - p.keys[0]) if len(p.keys) > 1 else 1
    data, enc = encode(p.values, step)
    L, S = _sizes(trace)
    header = {"view": "overview", "L": L, "S": S, "head": head, "step": step,
              "factor": [fr, fk], **enc, "legend": legend(step, fr, fk)}  # fmt: skip
    return Payload(header, data)


def _window_factor(rows: int, keys: int, max_cells: int) -> int:
    """The smallest f with ⌈rows/f⌉·⌈keys/f⌉ ≤ max_cells."""
    f = max(1, math.ceil(math.sqrt(rows * keys / max_cells)))
    while math.ceil(rows / f) * math.ceil(keys / f) > max_cells:
        f += 1
    return f


def window(
    trace, head: int | None, r0: int, r1: int, c0: int, c1: int, *, step: str = "weights",
    max_cells: int = MAX_WINDOW_CELLS,
):  # fmt: skip
    """Queries r0:r1 × keys c0:c1 of one head's ``step`` as float32: exact when the window has
    at most ``max_cells`` cells (``factor`` 1, with the rows' and keys' labels), else max-pooled
    by the smallest ``factor`` f (f × f numbers a cell) that fits. Read ``steps.ROWS`` queries
    at a time, so no more than one tile of (ROWS, S) numbers is held besides the answer."""
    L, S = _sizes(trace)
    step = _step(trace, step)
    r0, r1 = _int("r0", r0, 0, L - 1), _int("r1", r1, r0 + 1, L)
    c0, c1 = _int("c0", c0, 0, S - 1), _int("c1", c1, c0 + 1, S)
    f = _window_factor(r1 - r0, c1 - c0, _int("max_cells", max_cells, 1, 1 << 22))
    out = np.empty((math.ceil((r1 - r0) / f), math.ceil((c1 - c0) / f)), dtype=np.float32)
    chunk = max(f, ROWS - ROWS % f)  # a whole number of pooled rows per read
    for a in range(r0, r1, chunk):
        b = min(r1, a + chunk)
        part = trace.rows(slice(a, b), head=head, step=step)[:, c0:c1]  # (rows, keys)
        if f > 1:
            part = np.maximum.reduceat(part, np.arange(0, part.shape[0], f), axis=0)
            part = np.maximum.reduceat(part, np.arange(0, part.shape[1], f), axis=1)
        out[(a - r0) // f : (a - r0) // f + part.shape[0]] = part
    header = {"view": "window", "L": L, "S": S, "head": head, "step": step, "r0": r0, "r1": r1,
              "c0": c0, "c1": c1, "factor": f, "encoding": "float32",
              "exact": f == 1, "legend": legend(step, f, f)}  # fmt: skip
    if f == 1:
        header["rows"] = query_labels(trace)[r0:r1]
        header["keys"] = key_labels(trace)[c0:c1]
    return Payload(header, out)


def row(trace, head: int | None, q: int, width: int = ROW_WIDTH, k: int = 8):
    """Query ``q``'s weights over every key, max-pooled to at most ``width`` numbers (float32;
    exact when S ≤ width), with its ``k`` heaviest keys named (``Trace.top_keys``): position,
    label and exact weight. Header also: the query's label, entropy (nats), the weights' sum."""
    L, S = _sizes(trace)
    q = _int("q", q, 0, L - 1)
    width = _int("width", width, 1, MAX_ROW_WIDTH)
    k = _int("k", k, 1, MAX_TOP)
    w = np.asarray(trace.rows(q, head=head), dtype=np.float64)  # (S,)
    f = max(1, math.ceil(S / width))
    strip = np.maximum.reduceat(w, np.arange(0, S, f)) if S else w
    top = trace.top_keys(k, head=head, rows=[q])
    names = key_labels(trace)
    keys = [{"index": int(j), "token": names[int(j)], "weight": float(x)}
            for j, x in zip(top.keys[0], top.weights[0], strict=True)]  # fmt: skip
    header = {"view": "row", "L": L, "S": S, "head": head, "q": q,
              "token": query_labels(trace)[q], "factor": f, "encoding": "float32",
              "top": keys, "entropy": float(entropy(w)),
              "sum": float(w.sum()), "legend": legend("weights", 1, f)}  # fmt: skip
    return Payload(header, strip.astype(np.float32))


def search(tokens, text: str, *, limit: int = MAX_HITS) -> dict:
    """Positions whose token matches ``text``: a label or ``token@position`` as
    ``explain.tokens`` names them, else every token containing ``text`` (edge spaces and case
    ignored, ␣ read as a space). {"query", "hits": [{index, token}], "count"} (at most ``limit``
    hits; ``count`` counts all)."""
    if not isinstance(text, str) or not text.strip(" ␣"):
        raise ValueError(f"search text must contain a non-space character, got {text!r}")
    names = labels(list(tokens), len(tokens))
    try:
        at = select_label(list(tokens), text)
    except ValueError:
        at = None
    if at is not None:
        found = [at]
    else:
        wanted = text.replace("␣", " ").strip().lower()
        found = [j for j, t in enumerate(tokens) if wanted in visible(t).replace("␣", " ").lower()]
    hits = [{"index": j, "token": names[j]} for j in found[:limit]]
    return {"query": text, "hits": hits, "count": len(found)}


def pooled_heads(layers, size: int = THUMB, *, progress=None, forget: bool = True):
    """Every head of every layer (a dict or sequence of layer traces, in order) max-pooled to
    at most size × size (``Trace.pooled``): ((n_layers, n_heads, R, K) float64, the layer
    indices). Never an L × L array per head. ``progress(done, n_layers)`` after each layer;
    ``forget`` empties a lazy layer's tile cache once its heads are read (reading every head
    would otherwise leave each layer's cache full)."""
    size = _int("size", size, 1, THUMB)
    order = list(layers.items()) if isinstance(layers, dict) else list(enumerate(layers))
    if not order:
        raise ValueError("thumbnails need at least one layer")
    out = []
    for done, (_, t) in enumerate(order, 1):
        n = t.settings.get("n_heads")
        out.append([t.pooled(size, head=h).values for h in range(n)] if n
                   else [t.pooled(size).values])  # fmt: skip
        if forget and hasattr(t, "source"):
            t.source.cache.clear()
        if progress is not None:
            progress(done, len(order))
    return np.array(out), [int(i) for i, _ in order]


def thumbnails(layers, size: int = THUMB, *, progress=None):
    """``pooled_heads`` as one byte a cell (``encode``'s sqrt encoding): data (n_layers,
    n_heads, R, K); header: layers, L, S, factor, legend."""
    values, order = pooled_heads(layers, size, progress=progress)
    data, enc = encode(values, "weights")
    first = layers[order[0]] if isinstance(layers, dict) else layers[0]
    L, S = _sizes(first)
    fr, fk = math.ceil(L / data.shape[2]), math.ceil(S / data.shape[3])
    header = {"view": "thumbnails", "L": L, "S": S, "layers": order, "factor": [fr, fk],
              **enc, "legend": legend("weights", fr, fk)}  # fmt: skip
    return Payload(header, data)


def at_temperature(trace, tau: float):
    """``trace`` with its steps at temperature ``tau`` (tempered = scaled ÷ τ): a
    ``LazyTrace`` gets a new source over the same q, k, v (nothing is computed until read); an
    eager trace is recomputed by ``qkv.attention`` from its q, k, v."""
    from qkv import checks
    from qkv.lazy import LazyTrace
    from qkv.tiles import Source

    tau = checks.temperature_value(tau)
    if float(trace.settings.get("temperature", 1.0)) == tau:
        return trace
    if isinstance(trace, LazyTrace):
        s = trace.source
        src = Source(s.q, s.k, s.v, s.rule, scale=s.scale, temperature=tau, softcap=s.softcap,
                     bias=s.bias, sinks=s.sinks, W_O=s.W_O, b_O=s.b_O)  # fmt: skip
        return LazyTrace(src, stored=trace.stored, extra=trace.extra, tokens=trace.tokens,
                         key_tokens=trace.key_tokens, head=trace.head_index,
                         budget=trace.budget)  # fmt: skip
    return _rerun(trace, tau)


def _rerun(trace, tau: float):
    from qkv.attention import attention

    s = trace.settings
    if not all(n in trace.steps for n in ("q", "k", "v")):
        raise ValueError("this trace holds no q, k, v to recompute at another τ")
    if any(s.get(n) is not None for n in ("softcap", "sinks")) or "biased" in trace.steps:
        raise ValueError("τ is fixed for a trace with soft-capping, a bias or sinks here")
    _, new = attention(trace["q"], trace["k"], trace["v"], mask=s.get("mask"),
                       causal=s.get("causal") or False, scale=s["scale"], temperature=tau,
                       return_trace=True)  # fmt: skip
    new.tokens, new.key_tokens = trace.tokens, trace.key_tokens
    return new
