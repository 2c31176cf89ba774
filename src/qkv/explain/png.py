"""A tiny PNG writer (zlib only) for the static HTML's thumbnails: one RGB pixel per weight."""

from __future__ import annotations

import base64
import struct
import zlib

import numpy as np

LOW = np.array([247, 249, 252], np.float64)  # weight 0: the page's ramp (dom.js's shade)
HIGH = np.array([37, 84, 199], np.float64)  # weight 1


def ramp(w: np.ndarray, *, sqrt: bool = False) -> np.ndarray:
    """Weights in [0, 1] (any shape) -> uint8 RGB (..., 3) on the page's blue ramp; ``sqrt``
    shades by √weight, as the page's thumbnails do, so small weights still show."""
    t = np.clip(np.nan_to_num(np.asarray(w, np.float64)), 0.0, 1.0)
    t = np.sqrt(t) if sqrt else t
    return np.rint(LOW + (HIGH - LOW) * t[..., None]).astype(np.uint8)  # (..., 3)


def png(rgb: np.ndarray) -> bytes:
    """(height, width, 3) uint8 -> PNG bytes (8-bit RGB, no filter)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[r].tobytes() for r in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def data_uri(rgb: np.ndarray) -> str:
    return "data:image/png;base64," + base64.b64encode(png(rgb)).decode()
