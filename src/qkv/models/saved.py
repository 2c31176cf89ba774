"""A model run on disk (``run.save(path)``, ``qkv.load(path)``, ``qkv trace -o FILE``): what the
lazy traces are computed from, never a computed step.

Layout (version 1), all integers little-endian:

    8 bytes   b"QKVTRACE"
    4 bytes   version (uint32) = 1
    8 bytes   n, the header's length (uint64)
    n bytes   the header: UTF-8 JSON: model, tokens, ids, the hidden states' entry, and per
              layer its settings and the entries of its arrays (x, q, k, v, out, rope, the
              mask's array, bias, sinks, W_O, b_O where present)
    …         the arrays' raw bytes (C order), each at its entry's ``offset`` from here,
              64-byte aligned; the file ends with the last array

An entry is {"dtype": "<f4", "shape": [...], "offset": int}. ``load`` checks the magic, the
version, the header's size and fields, every entry (a known dtype, at most 8 axes, inside the
file, no two overlapping, the file no longer than its arrays) and the shapes against each other
before it allocates any array: a truncated, oversized or foreign file is refused by name.
"""

from __future__ import annotations

import json
import math
import os
import struct

import numpy as np

from qkv import masks
from qkv.lazy import LazyTrace
from qkv.tiles import Source

MAGIC = b"QKVTRACE"
VERSION = 1
PREAMBLE = struct.Struct("<8sIQ")  # magic, version, header length
MAX_HEADER = 64 << 20  # bytes of JSON: tokens and ids of 8,192 tokens take ~0.2 MB
ALIGN = 64
DTYPES = ("<f2", "<f4", "<f8", "|b1")
SOURCE = ("q", "k", "v", "mask", "bias", "sinks", "W_O", "b_O")
STORED = ("x", "rope", "out")
SETTINGS = ("scale", "temperature", "softcap", "causal", "window", "L", "S", "rope_base")


def save(run, path) -> int:
    """Write ``run`` (a ``ModelTrace`` of lazy layer traces) to ``path``; returns its size."""
    arrays: list[np.ndarray] = []

    def entry(a) -> dict | None:
        if a is None:
            return None
        a = np.asarray(a)
        a = a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a
        if a.dtype.str not in DTYPES:
            a = a.astype(np.float32 if a.dtype.kind == "f" else bool)
        arrays.append(a)
        return {"dtype": a.dtype.str, "shape": list(a.shape), "offset": None}

    hidden = entry(run.hidden)
    layers = []
    for i in sorted(run.layers):
        t = run.layers[i]
        if not isinstance(t, LazyTrace) or t.head_index is not None or t.source.lead:
            raise ValueError(
                f"layer {i}: only a run of lazy traces of one sequence saves "
                f"(a trace of q, k, v), got {type(t).__name__}"
            )
        s = t.source
        found = {**{n: getattr(s, n) for n in SOURCE if n != "mask"}, "mask": s.rule.mask}
        found.update({n: t.stored.get(n) for n in STORED})
        settings = {"scale": s.scale, "temperature": s.temperature, "softcap": s.softcap,
                    "causal": s.rule.causal, "window": s.rule.window, "L": s.L, "S": s.S,
                    "rope_base": t.extra.get("rope_base")}  # fmt: skip
        layers.append({"index": i, "settings": settings,
                       "arrays": {n: e for n, a in found.items() if (e := entry(a))}})  # fmt: skip
    header = {
        "format": "qkv.trace-file",
        "model": run.model,
        "tokens": list(run.tokens),
        "ids": [int(x) for x in run.ids],
        "hidden": hidden,
        "layers": layers,
    }
    entries = [hidden] if hidden else []
    entries += [e for layer in layers for e in layer["arrays"].values()]  # as arrays were added
    offset = 0
    for e, a in zip(entries, arrays, strict=True):
        e["offset"] = offset
        offset = _aligned(offset + a.nbytes)
    text = json.dumps(header, allow_nan=False).encode()
    start = _aligned(PREAMBLE.size + len(text))
    with open(path, "wb") as f:
        f.write(PREAMBLE.pack(MAGIC, VERSION, len(text)) + text)
        f.write(b"\0" * (start - PREAMBLE.size - len(text)))
        for e, a in zip(entries, arrays, strict=True):
            f.seek(start + e["offset"])
            f.write(np.ascontiguousarray(a).tobytes())
        return f.tell()


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def load(path) -> tuple:
    """What ``save`` wrote to ``path``: (model, tokens, ids, {layer: LazyTrace}, hidden), the
    fields of a ``ModelTrace`` (``ModelTrace.load``); a ValueError naming the problem for any
    other file (nothing is allocated before every size is checked)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(PREAMBLE.size)
        if len(head) < PREAMBLE.size or head[:8] != MAGIC:
            raise ValueError(f"{path}: not a qkv trace file (it does not start with {MAGIC!r})")
        _, version, n = PREAMBLE.unpack(head)
        if version != VERSION:
            raise ValueError(f"{path}: trace file version {version}; this qkv reads {VERSION}")
        if n > MAX_HEADER or PREAMBLE.size + n > size:
            raise ValueError(
                f"{path}: its header claims {n:,} bytes but the file has {size:,} "
                f"(at most {MAX_HEADER:,}): truncated or not a trace file"
            )
        try:
            header = json.loads(f.read(n).decode())
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ValueError(f"{path}: the header is not valid JSON") from None
        start = _aligned(PREAMBLE.size + n)
        plan = _plan(header, path, size - start)
        read = {}
        for key, e in plan:  # every size is checked: now allocate and read
            a = np.empty(e["shape"], dtype=np.dtype(e["dtype"]))
            f.seek(start + e["offset"])
            if f.readinto(a.data.cast("B")) != a.nbytes:
                raise ValueError(f"{path}: the file ended inside {key}")
            read[key] = a
    layers = {}
    for layer in header["layers"]:
        i, s = layer["index"], layer["settings"]
        got = {n: read.get((i, n)) for n in (*SOURCE, *STORED)}
        rule = masks.Rule(s["L"], s["S"], got["mask"], s["causal"], s["window"])
        source = Source(got["q"], got["k"], got["v"], rule, scale=s["scale"],
                        temperature=s["temperature"], softcap=s["softcap"], bias=got["bias"],
                        sinks=got["sinks"], W_O=got["W_O"], b_O=got["b_O"])  # fmt: skip
        extra = {} if s.get("rope_base") is None else {"rope_base": s["rope_base"]}
        stored = {n: got[n] for n in STORED if got[n] is not None}
        layers[i] = LazyTrace(source, stored=stored, extra=extra, tokens=list(header["tokens"]))
    hidden = read.get(("hidden",))
    return header["model"], header["tokens"], header["ids"], layers, hidden


def _plan(header, path, data: int) -> list:
    """Every array's (key, entry), checked against the header's other fields and the ``data``
    bytes after the header; a ValueError naming the first thing that is wrong."""

    def bad(what: str):
        return ValueError(f"{path}: {what}")

    if not isinstance(header, dict) or header.get("format") != "qkv.trace-file":
        raise bad("the header does not describe a qkv trace")
    tokens, ids, layers = header.get("tokens"), header.get("ids"), header.get("layers")
    if not (isinstance(tokens, list) and all(isinstance(t, str) for t in tokens)):
        raise bad("tokens: expected a list of strings")
    if not (isinstance(ids, list) and len(ids) == len(tokens) and all(_int(x) for x in ids)):
        raise bad(f"ids: expected {len(tokens)} integers, one per token")
    if not isinstance(header.get("model"), str) or not isinstance(layers, list):
        raise bad("model: expected a name; layers: expected a list")
    plan: list[tuple[tuple, dict]] = []  # (key: ("hidden",) or (layer, name), entry)
    if header.get("hidden") is not None:
        plan.append((("hidden",), header["hidden"]))
    for layer in layers:
        if not isinstance(layer, dict) or not _int(layer.get("index")):
            raise bad("layers: each entry needs an integer index")
        i, s, arrays = layer["index"], layer.get("settings"), layer.get("arrays")
        if not isinstance(s, dict) or not isinstance(arrays, dict):
            raise bad(f"layer {i}: expected settings and arrays objects")
        if set(arrays) - {*SOURCE, *STORED} or not {"q", "k"} <= set(arrays):
            raise bad(f"layer {i}: arrays must hold q and k, and only {SOURCE + STORED}")
        if not (_int(s.get("L")) and _int(s.get("S")) and _num(s.get("scale"))):
            raise bad(f"layer {i}: settings need integers L, S and a number scale")
        if not _num(s.get("temperature")) or s.get("causal") not in (None, *masks.ALIGNMENTS):
            raise bad(f"layer {i}: settings need a temperature and causal in {masks.ALIGNMENTS}")
        for name in ("softcap", "rope_base"):
            if s.get(name) is not None and not _num(s[name]):
                raise bad(f"layer {i}: {name} must be a number or null")
        if s.get("window") is not None and not _int(s["window"]):
            raise bad(f"layer {i}: window must be an integer or null")
        plan += [((i, n), e) for n, e in arrays.items()]
    spans = []
    for key, e in plan:
        _entry(key, e, bad)
        nbytes = math.prod(e["shape"]) * np.dtype(e["dtype"]).itemsize
        if e["offset"] + nbytes > data:
            raise bad(
                f"{_name(key)} ends at byte {e['offset'] + nbytes:,} of the data, which has "
                f"{data:,}: the file is truncated"
            )
        spans.append((e["offset"], e["offset"] + nbytes, key))
    spans.sort()
    for (_, end, a), (begin, _, b) in zip(spans, spans[1:], strict=False):
        if begin < end:
            raise bad(f"{_name(a)} and {_name(b)} overlap")
    last = max(end for _, end, _ in spans) if spans else 0
    if data > last:
        raise bad(f"{data - last:,} bytes follow the last array: not a file qkv wrote")
    _shapes(header, plan, bad)
    return plan


def _entry(key, e, bad) -> None:
    if not isinstance(e, dict) or e.get("dtype") not in DTYPES:
        raise bad(f"{_name(key)}: expected a dtype in {DTYPES}")
    shape, offset = e.get("shape"), e.get("offset")
    if not (isinstance(shape, list) and len(shape) <= 8 and all(_int(n) for n in shape)):
        raise bad(f"{_name(key)}: shape must be at most 8 non-negative integers")
    if not _int(offset):
        raise bad(f"{_name(key)}: offset must be a non-negative integer")


def _shapes(header, plan, bad) -> None:
    """The arrays' shapes against each other and the tokens (before anything is allocated)."""
    shapes = {key: tuple(e["shape"]) for key, e in plan}
    n = len(header["tokens"])
    for layer in header["layers"]:
        i, s = layer["index"], layer["settings"]
        q, k, v = shapes[(i, "q")], shapes[(i, "k")], shapes.get((i, "v"))  # q, k: _plan checked
        if len(q) != 3 or len(k) != 3 or q[1] != s["L"] or k[1] != s["S"] or q[2] != k[2]:
            raise bad(f"layer {i}: q {q} and k {k} must be (H, L, d) and (G, S, d)")
        if k[0] == 0 or q[0] % k[0] or v is not None and v[:2] != k[:2]:
            raise bad(f"layer {i}: heads of q {q}, k {k} and v {v} do not line up")
        if q[1] != n:
            raise bad(f"layer {i}: {q[1]} queries for {n} tokens")
        want = {"sinks": (q[0],), "x": (n, None), "out": (n, None)}
        for name, shape in want.items():
            got = shapes.get((i, name))
            if got is not None and (len(got) != len(shape) or got[0] != shape[0]):
                raise bad(f"layer {i}: {name} has shape {got}, expected {shape}")
        for name in ("mask", "bias"):  # (heads, L, S), each axis of its size or 1
            got = shapes.get((i, name))
            full = (q[0], q[1], k[1])
            if got is not None and not (
                len(got) == 3 and all(a in (1, b) for a, b in zip(got, full, strict=True))
            ):
                raise bad(f"layer {i}: {name} has shape {got}; expected (H, L, S) = {full} or 1s")


def _int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _name(key) -> str:
    return "hidden" if key == ("hidden",) else f"layer {key[0]} {key[1]}"
