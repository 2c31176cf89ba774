"""A layers × heads mosaic of attention patterns, drawn with matplotlib (Agg) to a PNG."""

from __future__ import annotations

import numpy as np


def mosaic(weights: np.ndarray, gap: int = 1) -> np.ndarray:
    """Tile weights (n_layers, n_heads, L, L) into one image (rows: layers, cols: heads),
    ``gap`` NaN pixels between tiles: -> (n_layers·(L+gap)−gap, n_heads·(L+gap)−gap)."""
    n_layers, n_heads, L, S = weights.shape
    img = np.full((n_layers * (L + gap) - gap, n_heads * (S + gap) - gap), np.nan)
    for r in range(n_layers):
        for c in range(n_heads):
            img[r * (L + gap): r * (L + gap) + L, c * (S + gap): c * (S + gap) + S] = weights[r, c]
    return img


def save_grid(weights: np.ndarray, path, *, title: str) -> None:
    """Write the mosaic of weights (n_layers, n_heads, L, L) to ``path`` as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_layers, n_heads, L, _ = weights.shape
    img = mosaic(weights)
    fig, ax = plt.subplots(figsize=(max(4.0, n_heads * 1.1), max(3.0, n_layers * 1.1 * 0.9)),
                           dpi=100)
    shown = ax.imshow(img, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
    ax.set_xticks([c * (L + 1) + (L - 1) / 2 for c in range(n_heads)], range(n_heads))
    ax.set_yticks([r * (L + 1) + (L - 1) / 2 for r in range(n_layers)], range(n_layers))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=9)
    fig.colorbar(shown, ax=ax, fraction=0.03, label="attention weight")
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
