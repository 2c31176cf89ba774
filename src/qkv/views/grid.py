"""The layers × heads grid of a model's run: every head's weights as one byte per weight, enough
to draw thumbnails (not to compute with)."""

from __future__ import annotations

import base64
from typing import Final

import numpy as np

GRID_ENCODING: Final = "uint8/255 base64"


def grid(weights: np.ndarray) -> dict:
    """(n_layers, n_heads, L, L) weights -> one byte each (weight ≈ byte / 255), base64."""
    data = np.clip(np.rint(weights * 255), 0, 255).astype(np.uint8)
    return {
        "shape": list(data.shape),
        "encoding": GRID_ENCODING,
        "data": base64.b64encode(data.tobytes()).decode(),
    }
