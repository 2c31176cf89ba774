"""Weight matrices kept as the GGUF file quantizes them, for one-token steps.

SmolLM2's file stores each weight matrix in blocks of 32 input features: Q4_1 as w = d·c + m
(a 4-bit code c per weight, d and m float16 per block), Q8_0 (the embedding) as w = d·c (an
8-bit signed code). The model dequantizes them to float32 once (``gguf_reader``), which is what
every pass with many rows multiplies (BLAS). A one-token step, though, reads every weight once
for one row: as float32 that is 4 bytes a weight, about 540 MB a token, and the step waits on
memory. ``Packed`` keeps the same numbers as the file's codes (half a byte a weight for Q4_1,
one for Q8_0) with the block's scale d and low m as the file's float16 (float32 where the
compiled code has no instruction to widen a float16: ``quantized_jit.WIDENS_FLOAT16``), and
``times`` multiplies a row by them without unpacking:

    y_o = Σ_b d_bo · (Σ_t c_bto · x_{32b+t})  +  m_bo · (Σ_t x_{32b+t})

the same weights, summed in another order: the result differs from x·W (float32 W) by
rounding alone. ``product`` takes this path for a single row when the matrix has a packed
form and numba is installed (``packing``), and x·W otherwise.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from qkv.kernels import threads
from qkv.kernels.fused import available  # numba can be imported
from qkv.layers import linear

BLOCK = 32  # input features per block, in both formats
KINDS = {"Q4_1": 20, "Q8_0": 34}  # bytes per block of 32 weights


@dataclass(frozen=True)
class Packed:
    """W (32·blocks, out) as codes: Q4_1 (low given) codes (blocks, 16, out) uint8, byte t of
    block b holding code t in its low nibble and code t + 16 in its high one; Q8_0 (low None)
    codes (blocks, 32, out) int8. Weight (32·b + t, o) = scale[b, o]·code + low[b, o]."""

    codes: np.ndarray
    scale: np.ndarray  # (blocks, out) float16 (read as its bits by the loops), or float32
    low: np.ndarray | None  # (blocks, out), as scale, or None

    @property
    def shape(self) -> tuple[int, int]:
        """(in_features, out_features), as the float32 W that ``linear`` multiplies."""
        return self.codes.shape[0] * BLOCK, self.codes.shape[2]

    def times(self, x: np.ndarray) -> np.ndarray:
        """x·W for one row: x (..., in) holding one row in all -> (..., out) float32."""
        n_in, n_out = self.shape
        if x.shape[-1] != n_in or x.size != n_in:
            raise ValueError(f"expected one row of {n_in} features, got shape {x.shape}")
        row = np.ascontiguousarray(x, dtype=np.float32).reshape(n_in)
        out = np.empty(n_out, np.float32)
        loops = _loops()
        scale, low = self.tables
        if low is None:
            loops.times8(self.codes, scale, row, out)
        else:
            loops.times4(self.codes, scale, low, row, out)
        return out.reshape(*x.shape[:-1], n_out)

    @functools.cached_property
    def tables(self) -> tuple[np.ndarray, np.ndarray | None]:
        """scale and low as the compiled loops take them (``_bits``), made on first use."""
        return _bits(self.scale), None if self.low is None else _bits(self.low)


def from_gguf(kind: str, rows: np.ndarray, *, float16_scales: bool | None = None) -> Packed:
    """A Packed matrix from a GGUF tensor's raw rows: (out, blocks·bytes per block) uint8 of
    ``kind`` "Q4_1" or "Q8_0" (one row per output feature, as the file stores it).
    float16_scales: keep the blocks' scales as float16 (default: where the compiled loops widen
    them in one instruction, ``quantized_jit.WIDENS_FLOAT16``; only there), else float32; the
    products are the same either way."""
    widens = available() and _loops().WIDENS_FLOAT16
    if float16_scales is None:
        float16_scales = widens
    elif float16_scales and not widens:
        raise ValueError(
            "float16_scales=True: expected compiled loops that widen float16 in one "
            "instruction (numba with a target that has F16C, or 64-bit ARM), got none here; "
            "use float16_scales=False"
        )
    if kind not in KINDS:
        raise ValueError(f"expected a GGUF quantization in {sorted(KINDS)}, got {kind!r}")
    width = KINDS[kind]
    if rows.ndim != 2 or rows.dtype != np.uint8 or rows.shape[1] % width:
        raise ValueError(
            f"expected {kind} rows (out, blocks·{width}) uint8, got {rows.dtype} {rows.shape}"
        )
    n_out = rows.shape[0]
    blocks = rows.reshape(n_out, -1, width)  # (out, blocks, bytes)
    scale = _halves(blocks[:, :, 0:2], float16_scales)  # (blocks, out)
    if kind == "Q8_0":
        codes, low = blocks[:, :, 2:].view(np.int8), None  # (out, blocks, 32)
    else:  # as stored: byte t holds weight t (low nibble) and weight t + 16 (high nibble)
        low = _halves(blocks[:, :, 2:4], float16_scales)
        codes = blocks[:, :, 4:]  # (out, blocks, 16)
    return Packed(np.ascontiguousarray(codes.transpose(1, 2, 0)), scale, low)


def stacked(parts: list[Packed]) -> Packed:
    """The matrices side by side along the outputs (W_Q, W_K, W_V as one W_QKV)."""
    kinds = {p.low is None for p in parts}
    if len(kinds) != 1 or len({p.shape[0] for p in parts}) != 1:
        raise ValueError("expected matrices of one kind with the same input features")
    low = None if kinds == {True} else np.concatenate([p.low for p in parts], axis=1)
    return Packed(
        np.concatenate([p.codes for p in parts], axis=2),
        np.concatenate([p.scale for p in parts], axis=1),
        low,
    )


def product(x: np.ndarray, W: np.ndarray, packed: dict, *, owner=None) -> np.ndarray:
    """x·W: by W's codes for a single float32 row (a decoding step, where reading the weights
    is the cost) when ``packed`` holds them, else ``layers.linear`` (a large product split by
    rows over the kernels' workers: ``threads.rows_product``). packed maps id(owner) to
    (owner, W's Packed form); owner is W itself unless W is a view made on the fly (Eᵀ), so a
    matrix replaced since is never multiplied by stale codes."""
    owner = W if owner is None else owner
    found = packed.get(id(owner))
    if found is not None and found[0] is owner and x.dtype == np.float32:
        if x.size == x.shape[-1] and found[1].shape == W.shape:
            return found[1].times(x)
    return linear(x, W, matmul=threads.rows_product)


def packing(pairs) -> dict[int, tuple[np.ndarray, Packed]]:
    """``product``'s table from (owner, W's Packed form) pairs, W float32 (in, out) being owner
    or its transpose; {} without numba (every product is then ``layers.linear``). Each owner
    becomes read-only: its codes would not follow an edit made in place, so such an edit is an
    error (a new array in its place is multiplied by BLAS, ``product``)."""
    if not available():
        return {}
    table = {}
    for owner, codes in pairs:
        if codes.shape not in (owner.shape, owner.shape[::-1]):
            raise ValueError(f"packed weights {codes.shape} do not match {owner.shape}")
        owner.setflags(write=False)
        table[id(owner)] = (owner, codes)
    return table


def _halves(pairs: np.ndarray, keep: bool) -> np.ndarray:
    """(out, blocks, 2) uint8 little-endian float16 -> (blocks, out) float16 (keep), else
    float32 (exact either way)."""
    values = np.ascontiguousarray(pairs).view(np.float16)[..., 0]  # (out, blocks)
    return np.ascontiguousarray(values.T, dtype=np.float16 if keep else np.float32)


def _bits(table: np.ndarray) -> np.ndarray:
    """A table of scales as the loops take it: float16 as its bits (uint16) where they widen
    it, else as float32; float32 as is."""
    if table.dtype != np.float16:
        return table
    return table.view(np.uint16) if _loops().WIDENS_FLOAT16 else table.astype(np.float32)


@functools.cache
def _loops():
    """The compiled loops (numba is imported only here)."""
    from qkv.models import quantized_jit

    return quantized_jit
