"""A still picture of what a view shows, as PNG bytes: the selected head's weights, max-pooled
to at most ``CELLS`` × ``CELLS`` cells (so one sharp weight stays visible), the selected
query's row marked at the left, and under it that row over every key, pooled the same way.

It is what a saved notebook, nbconvert's HTML and GitHub show of ``qkv.show`` without a
kernel. Colours are the page's ramp (``web/static/dom.js``'s ``RAMP``): shade ∝ √weight,
darker = more weight. Drawn with NumPy and zlib alone.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

CELLS = 192  # the heatmap is pooled to at most this many cells a side
SIDE = 384  # pixels a side the heatmap aims for (whole pixels per cell, at least 1)
MARGIN = 8  # pixels left of the heatmap: the selected query's mark
GAP = 8  # pixels between the heatmap and the row strip
STRIP = 24  # pixels the row strip is tall
RAMP = ((247, 249, 252), (107, 150, 222), (37, 84, 199), (10, 31, 97))  # light → dark blue
MARK = (214, 96, 26)  # the selected query's mark
WHITE = (255, 255, 255)


@dataclass(frozen=True)
class Picture:
    """PNG bytes and what they show: ``cells`` (rows, keys) of the pooled heatmap, ``cell``
    pixels a cell side, ``rows`` / ``keys`` the pooling's edges (cell i holds queries
    rows[i]…rows[i+1]−1), ``select`` the query marked."""

    png: bytes
    width: int
    height: int
    cells: tuple[int, int]
    cell: int
    rows: np.ndarray
    keys: np.ndarray
    select: int

    def words(self) -> str:
        """What the picture shows, in words (beside it where images do not show)."""
        L, S = int(self.rows[-1]), int(self.keys[-1])
        pooled = (
            ""
            if self.cells == (L, S)
            else f", max-pooled to {self.cells[0]} × {self.cells[1]} cells"
        )
        return (
            f"weights of {L} queries × {S} keys{pooled} (darker = more weight, shade ∝ "
            f"√weight); below: query {self.select}'s row, marked at the left"
        )


def ramp(t: np.ndarray) -> np.ndarray:
    """The page's ramp at t in [0, 1] (clamped, NaN as 0): (..., 3) uint8, as ``rampColor``."""
    t = np.clip(np.nan_to_num(np.asarray(t, dtype=np.float64), nan=0.0), 0, 1) * (len(RAMP) - 1)
    k = np.minimum(len(RAMP) - 2, np.floor(t)).astype(int)
    f = (t - k)[..., None]
    stops = np.asarray(RAMP, dtype=np.float64)
    # Math.round rounds halves up: floor(x + 0.5)
    return np.floor(stops[k] + (stops[k + 1] - stops[k]) * f + 0.5).astype(np.uint8)


def png(rgb: np.ndarray) -> bytes:
    """An (height, width, 3) uint8 image as PNG bytes (8-bit RGB, no filter)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or 0 in rgb.shape:
        raise ValueError(f"png takes a non-empty (height, width, 3) image, got {rgb.shape}")
    height, width = rgb.shape[:2]
    lines = np.concatenate(
        [np.zeros((height, 1), np.uint8), rgb.reshape(height, 3 * width)], axis=1
    )  # (height, 1 + 3·width): filter type 0 before each line

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(lines.tobytes(), 9))
        + chunk(b"IEND", b"")
    )


def picture(trace, select: int, *, head: int | None = None) -> Picture:
    """The picture of ``head`` of ``trace`` (None: a trace without a head axis) with query
    ``select`` marked; reads the pooled weights and one row (``Trace.pooled``, ``Trace.rows``)."""
    pooled = trace.pooled(CELLS, head=head)
    row = np.asarray(trace.rows(select, head=head), dtype=np.float64)  # (S,)
    grid = np.where(np.isfinite(pooled.values), pooled.values, 0.0)  # (R, K)
    R, K = grid.shape
    strip = np.maximum.reduceat(np.nan_to_num(row), pooled.keys[:-1]) if K else row[:0]  # (K,)
    cell = max(1, SIDE // max(R, K, 1))
    width, height = MARGIN + K * cell, R * cell + GAP + STRIP
    img = np.empty((height, width, 3), np.uint8)
    img[:] = WHITE
    heat = ramp(np.sqrt(np.maximum(grid, 0)))  # (R, K, 3)
    img[: R * cell, MARGIN:] = heat.repeat(cell, axis=0).repeat(cell, axis=1)
    at = int(np.searchsorted(pooled.rows, select, side="right")) - 1  # the query's pooled row
    img[at * cell : (at + 1) * cell, : MARGIN - 2] = MARK
    band = ramp(np.sqrt(np.maximum(strip, 0)))  # (K, 3)
    img[R * cell + GAP :, MARGIN:] = band.repeat(cell, axis=0)[None]
    img[R * cell + GAP :, : MARGIN - 2] = MARK
    return Picture(png(img), width, height, (R, K), cell, pooled.rows, pooled.keys, select)
