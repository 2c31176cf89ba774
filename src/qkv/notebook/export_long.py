"""A long text as one HTML file (``qkv export`` and ``to_html`` past
``views.long_text.PANEL_TOKENS`` tokens): for every layer and head, its weights max-pooled to an
overview (``views.zoom.overview``) and each query's heaviest keys, computed now and packed as
binary. The file's view is the widget's JavaScript; an in-file stand-in for the kernel
(``offline_long.js``) answers its requests from these arrays, and the file says in words what it
leaves out.

Arrays: ``Blob`` concatenates them (little-endian, each at a multiple of 8 bytes) and the JSON
names each one by offset and size; ``document`` gzips the blob and writes it as base64.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from qkv.explain.html import count
from qkv.trace import Trace
from qkv.views import zoom
from qkv.views.viewers import View

# At 4,096 tokens SmolLM2's 30 × 9 heads then fit 20 MB (gzip, base64): each head's overview
# and keys about 100 KB, its float16 weights about 180 KB.
OVERVIEW = 192  # cells a side of each head's overview
TOP = 3  # keys kept per query and head
MAX_FILE_BYTES = 20_000_000  # a file past this is refused: fewer layers, then


class Blob:
    """Arrays packed one after another; ``add`` returns where one lies."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, a: np.ndarray) -> dict:
        a = np.ascontiguousarray(a)
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        at = self.size
        pad = -len(raw) % 8
        self.parts.append(raw + b"\0" * pad)
        self.size += len(raw) + pad
        return {"at": at, "n": len(raw), "dtype": a.dtype.name, "shape": list(a.shape)}

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def leaves_out(view: View, temperature: float) -> str:
    """What the file holds and what it leaves out, in words (shown at the top of the file)."""
    L = len(view.tokens)
    layers = count(len(view.layers), "layer") + " × " if view.layers is not None else ""
    return (
        f"This file holds, for {layers}{count(view.n_heads or 1, 'head')} at τ = {temperature:g}: "
        f"the weights max-pooled to at most {OVERVIEW} × {OVERVIEW} cells (one byte a cell, "
        f"shade ∝ √weight; one sharp weight stays visible) and each of the {L} queries' "
        f"{TOP} heaviest keys with their weights (float16, about 3 significant digits). It "
        "leaves out the exact weights of every other cell (zooming in shows the pooled "
        "overview, not single cells), the entropy and sum of each row, the steps before the "
        "weights (scores … masked), q, k, v and z, and every other τ. qkv.show(run) in a "
        "notebook or qkv serve computes any of them."
    )


def table(
    view: View,
    *,
    temperature: float,
    select: int,
    head: int,
    layer: int,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict, bytes]:
    """(the file's JSON, its arrays): every layer × head's overview and each query's ``TOP``
    keys; ``progress(done, total)`` after each head."""
    layers = view.layers if view.layers is not None else [0]
    n_heads = view.n_heads or 1
    blob = Blob()
    heads = {}
    total = len(layers) * n_heads
    for li, lay in enumerate(layers):
        for h in range(n_heads):
            tr, hh = view.shown(temperature=temperature, head=h, layer=lay)
            w = np.asarray(tr.rows(slice(None), head=hh))  # (L, S): read once, tile by tile
            one = Trace({"weights": w}, {**_sizes(w), "n_heads": None}, tokens=view.tokens)
            ov = zoom.overview(one, None, OVERVIEW)
            top = one.top_keys(TOP)
            heads[f"{lay}|{h}"] = {
                "overview": {"header": ov.header, "data": blob.add(ov.data)},
                "keys": blob.add(top.keys.astype(np.uint16)),  # (L, TOP)
                "weights": blob.add(planes(top.weights.astype(np.float16))),  # (2, L, TOP)
            }
            if progress is not None:
                progress(li * n_heads + h + 1, total)
    words = leaves_out(view, temperature)
    info = {
        **view.info(),
        "lesson": words,
        "tau": {"fixed": None, "values": [temperature], "why": "the one τ this file holds"},
    }
    start = {"select": select, "temperature": temperature, "head": head, "layer": layer}
    return {"info": info, "start": start, "long": {"top": TOP, "heads": heads}}, blob.bytes()


def planes(a: np.ndarray) -> np.ndarray:
    """float16 (L, k) -> its low bytes, then its high bytes: (2, L, k) uint8 (the high bytes,
    sign and exponent, repeat and compress well apart)."""
    b = np.ascontiguousarray(a.astype("<f2")).view(np.uint8).reshape(*a.shape, 2)
    return np.moveaxis(b, -1, 0).copy()


def _sizes(w: np.ndarray) -> dict:
    return {"L": int(w.shape[0]), "S": int(w.shape[1])}
