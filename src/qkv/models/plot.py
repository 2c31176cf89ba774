"""A layers × heads mosaic of attention patterns, drawn with matplotlib (Agg) to a PNG.

Cells a query may not attend to (a causal model's future keys, padding) are drawn grey, apart
from the colour scale: a masked weight is not a weight of 0 that the model chose.
"""

from __future__ import annotations

import numpy as np

MASKED = (208 / 255, 208 / 255, 208 / 255, 1.0)  # #d0d0d0, as qkv explain --png draws them
GAP = (1.0, 1.0, 1.0, 1.0)  # the white lines between tiles


def mosaic(weights: np.ndarray, gap: int = 1) -> np.ndarray:
    """Tile weights (n_layers, n_heads, L, L) into one image (rows: layers, cols: heads),
    ``gap`` NaN pixels between tiles: -> (n_layers·(L+gap)−gap, n_heads·(L+gap)−gap)."""
    n_layers, n_heads, L, S = weights.shape
    img = np.full((n_layers * (L + gap) - gap, n_heads * (S + gap) - gap), np.nan)
    for r in range(n_layers):
        for c in range(n_heads):
            img[r * (L + gap) : r * (L + gap) + L, c * (S + gap) : c * (S + gap) + S] = weights[
                r, c
            ]
    return img


def colours(weights: np.ndarray, mask: np.ndarray | None = None, *, cmap="viridis") -> np.ndarray:
    """The mosaic as RGBA pixels (H, W, 4): the colour map for weights a query may attend to,
    grey where ``mask`` (True = may attend, broadcast to weights) is False, white between tiles."""
    import matplotlib

    allowed = np.ones(weights.shape, bool) if mask is None else np.broadcast_to(mask, weights.shape)
    img, ok = mosaic(weights), mosaic(allowed.astype(float))  # (H, W); NaN in the gaps
    rgba = matplotlib.colormaps[cmap](np.clip(np.nan_to_num(img), 0.0, 1.0))  # (H, W, 4)
    rgba[ok == 0] = MASKED
    rgba[np.isnan(ok)] = GAP
    return rgba


def save_grid(weights: np.ndarray, path, *, title: str, mask: np.ndarray | None = None) -> None:
    """Write the mosaic of weights (n_layers, n_heads, L, L) to ``path`` as a PNG; ``mask``
    (broadcastable to weights, True = may attend) marks the cells drawn grey."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    n_layers, n_heads, L, _ = weights.shape
    fig = Figure(figsize=(max(4.0, n_heads * 1.1), max(3.0, n_layers * 1.1 * 0.9)), dpi=100)
    FigureCanvasAgg(fig)  # its own canvas: no pyplot, no global figure state
    ax = fig.add_subplot()
    ax.imshow(colours(weights, mask), interpolation="nearest")
    ax.set_xticks([c * (L + 1) + (L - 1) / 2 for c in range(n_heads)], map(str, range(n_heads)))
    ax.set_yticks([r * (L + 1) + (L - 1) / 2 for r in range(n_layers)], map(str, range(n_layers)))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=9)
    scale = ScalarMappable(Normalize(0.0, 1.0), matplotlib.colormaps["viridis"])
    fig.colorbar(scale, ax=ax, fraction=0.03, label="attention weight")
    if mask is not None and not np.all(mask):
        ax.set_xlabel("head\ngrey: masked (the query may not attend to that key)")
    fig.savefig(path, bbox_inches="tight")
