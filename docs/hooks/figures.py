"""Small matplotlib drawings for the concept pages, returned as inline SVG.

Every figure is a ``matplotlib.figure.Figure`` on its own Agg canvas (no pyplot state); the
numbers it shows are passed in, computed by qkv in the block that draws it.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

INK = "#1d2433"


def figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def svg(fig: Figure) -> str:
    """The figure as an inline ``<svg>`` element (text kept as text)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", transparent=True)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def matrix(ax, a, *, rows=None, cols=None, title="", cmap="Blues", mask=None, fmt="{:.2f}"):
    """A labelled heatmap of a small 2-D array with its numbers in the cells; cells where
    ``mask`` is False are grey with a ×."""
    a = np.asarray(a, dtype=float)
    shown = np.ma.masked_where(~mask, a) if mask is not None else np.ma.masked_invalid(a)
    finite = a[np.isfinite(a)] if np.isfinite(a).any() else np.zeros(1)
    lo, hi = float(finite.min()), float(finite.max())
    if cmap == "RdBu_r":
        hi = max(abs(lo), abs(hi)) or 1.0
        lo = -hi
    ax.imshow(shown, cmap=_cmap(cmap), vmin=lo, vmax=hi if hi > lo else lo + 1, aspect="auto")
    for (r, c), value in np.ndenumerate(a):
        if mask is not None and not mask[r, c]:
            ax.text(c, r, "×", ha="center", va="center", color="#606060", fontsize=10)
            continue
        t = (value - lo) / (hi - lo) if hi > lo else 0.0
        ink = "white" if (t > 0.6 or (cmap == "RdBu_r" and abs(value) > 0.6 * hi)) else INK
        ax.text(c, r, fmt.format(value), ha="center", va="center", color=ink, fontsize=8)
    ax.set_xticks(range(a.shape[1]), cols if cols is not None else range(a.shape[1]))
    ax.set_yticks(range(a.shape[0]), rows if rows is not None else range(a.shape[0]))
    ax.tick_params(length=0, labelsize=8)
    ax.set_title(title, fontsize=9)
    for side in ax.spines.values():
        side.set_visible(False)


def _cmap(name: str):
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad="#d0d0d0")


def bars(ax, values, labels, *, title="", highlight=None, fmt="{:.2f}", color="#2554c7"):
    """Vertical bars with their values written above."""
    values = np.asarray(values, dtype=float)
    colours = [("#e0b100" if i == highlight else color) for i in range(len(values))]
    ax.bar(range(len(values)), values, color=colours)
    for i, value in enumerate(values):
        if abs(value) >= 0.005:  # a zero bar needs no label
            ax.text(i, value, fmt.format(value), ha="center", va="bottom", fontsize=8, color=INK)
    ax.set_xticks(range(len(values)), labels, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    ax.tick_params(labelsize=8)


def row_outline(i: int, n: int, colour: str = "#e0b100"):
    """A rectangle around row ``i`` of an ``n``-column heatmap: the selected query."""
    from matplotlib.patches import Rectangle

    return Rectangle((-0.5, i - 0.5), n, 1, fill=False, edgecolor=colour, linewidth=2)
