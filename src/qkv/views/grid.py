"""The layers × heads grid of a model's run: every head's weights as one byte per weight, enough
to draw thumbnails (not to compute with); ``grid_of`` max-pools each head first
(``views.zoom.pooled_heads``), so a long text's grid never holds L × L numbers per head."""

from __future__ import annotations

import base64
from typing import Final

import numpy as np

from qkv.views.zoom import THUMB, pooled_heads

GRID_ENCODING: Final = "uint8/255 base64"


def grid(weights: np.ndarray) -> dict:
    """(n_layers, n_heads, L, L) weights -> one byte each (weight ≈ byte / 255), base64."""
    data = np.clip(np.rint(weights * 255), 0, 255).astype(np.uint8)
    return {
        "shape": list(data.shape),
        "encoding": GRID_ENCODING,
        "data": base64.b64encode(data.tobytes()).decode(),
    }


def grid_of(layers, size: int = THUMB) -> dict:
    """A run's layers (index -> trace) as ``grid``, each head max-pooled to at most
    size × size first: (n_layers, n_heads, R, K), the exact weights when L ≤ size."""
    values, _ = pooled_heads(layers, size)
    return grid(values)
