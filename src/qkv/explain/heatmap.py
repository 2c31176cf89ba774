"""A heatmap of attention weights (queries × keys) written to PNG with matplotlib's Agg canvas.

Masked cells are grey with a ×, each cell shows its weight, and the selected query's row is
outlined. The image is ``size`` pixels exactly (no tight bounding box).
"""

from __future__ import annotations

import numpy as np

SIZE = (800, 600)  # pixels
DPI = 100


def weights_png(
    trace,
    path,
    *,
    query: int | None = None,
    head: int | None = None,
    title: str = "",
    size: tuple[int, int] = SIZE,
) -> tuple[int, int]:
    """Write the weights of one head of ``trace`` to ``path``; returns the (width, height) in px."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    from qkv.explain.walkthrough import labels

    tr = trace.numpy()
    heads = tr.settings.get("n_heads")
    w = tr["weights"]  # ([H,] L, S)
    if heads:
        head = 0 if head is None else head
        w = w[..., head, :, :]
    if w.ndim != 2:
        raise ValueError(f"expected weights of shape ([n_heads,] L, S), got {tr['weights'].shape}")
    L, S = w.shape
    mask = tr.settings.get("mask")
    allowed = np.ones((L, S), bool)
    if mask is not None:
        full = np.broadcast_to(mask, tr["weights"].shape)  # ([H,] L, S)
        allowed = full[..., head, :, :] if heads else full
    rows = labels(tr.tokens, L)
    cols = labels(tr.key_tokens or (tr.tokens if S == L else None), S)

    # A Figure on its own Agg canvas: no pyplot, so no global backend or figure state is touched.
    fig = Figure(figsize=(size[0] / DPI, size[1] / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    cmap = matplotlib.colormaps["Blues"].with_extremes(bad="#d0d0d0")
    img = ax.imshow(np.ma.masked_where(~allowed, w), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    fig.colorbar(img, ax=ax, label="weight")
    small = L * S <= 144
    for r in range(L):
        for c in range(S):
            if not allowed[r, c]:
                ax.text(c, r, "×", ha="center", va="center", color="#606060", fontsize=12)
            elif small:
                ax.text(
                    c,
                    r,
                    f"{w[r, c]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=9,
                    color="white" if w[r, c] > 0.6 else "black",
                )
    if query is not None:
        ax.add_patch(
            Rectangle((-0.5, query - 0.5), S, 1, fill=False, edgecolor="#d62728", linewidth=2.5)
        )
    tilt = S > 6
    ax.set_xticks(range(S), cols, rotation=45 if tilt else 0, ha="right" if tilt else "center")
    ax.set_yticks(range(L), rows)
    ax.set_xlabel("keys")
    ax.set_ylabel("queries")
    where = f", head {head}" if heads else ""
    ax.set_title(
        (title + where + " — " if title else "")
        + "attention weights"
        + (" (× = masked)" if not allowed.all() else "")
    )
    fig.subplots_adjust(left=0.15, right=0.97, bottom=0.15, top=0.9)
    fig.savefig(path, dpi=DPI)
    return size
