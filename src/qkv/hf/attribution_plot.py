"""A picture of an attribution, drawn with matplotlib (Agg) to a PNG from its ``to_dict()``.

Panels: the layers × heads grid of each head's share of the logit difference (red adds to it,
blue takes away; one colour scale centred on 0), the MLPs' shares per layer beside it, the grid
of activation-patching scores when there is one, and the top head's share split by key.
"""

from __future__ import annotations

import numpy as np

from qkv.explain.tokens import labels, visible


def _grid(fig, ax, values, title, label):
    from matplotlib.colors import TwoSlopeNorm

    top = float(np.max(np.abs(values))) or 1.0
    image = ax.imshow(
        values,
        cmap="RdBu_r",
        norm=TwoSlopeNorm(0.0, -top, top),
        aspect="auto",
        interpolation="nearest",
    )
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.05, label=label)


def save(report: dict, path, *, title: str) -> None:
    """Write the picture of ``report`` (an ``Attribution.to_dict()``, with ``"patching"`` from a
    ``Patching.to_dict()`` or None) to ``path`` as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    heads, mlp = np.array(report["heads"]), np.array(report["mlp"])
    patching = report.get("patching")
    splits = report.get("by_key") or []
    n_layers = heads.shape[0]
    columns = 3 if patching else 2
    size = (4.2 * columns, 3.2 + 0.16 * n_layers + (2.6 if splits else 0))
    fig = Figure(figsize=size, dpi=100, layout="constrained")
    FigureCanvasAgg(fig)  # its own canvas: no pyplot, no global figure state
    grid = fig.add_gridspec(2 if splits else 1, columns, height_ratios=[3, 1] if splits else [1])
    ld = report["logit_diff"]
    _grid(fig, fig.add_subplot(grid[0, 0]), heads, "each head's share", f"share of {ld:.3g}")
    ax = fig.add_subplot(grid[0, 1])
    ax.barh(np.arange(n_layers), mlp, color=np.where(mlp >= 0, "#c0392b", "#2c6fbb"))
    ax.set_ylim(n_layers - 0.5, -0.5)
    ax.axvline(0.0, color="black", linewidth=0.6)
    ax.set_xlabel(f"share of {ld:.3g}")
    ax.set_title(
        f"MLPs (embeddings {report['embed']:+.3g}, biases {report['rest']:+.3g})", fontsize=9
    )
    if patching:
        _grid(
            fig,
            fig.add_subplot(grid[0, 2]),
            np.array(patching["heads"]),
            "activation patching: a head's z, clean → corrupted",
            "share of the difference restored",
        )
    if splits:
        first = splits[0]
        parts = np.array(first["parts"])
        names = labels(report["tokens"], len(parts))
        ax = fig.add_subplot(grid[1, :])
        ax.bar(np.arange(len(parts)), parts, color=np.where(parts >= 0, "#c0392b", "#2c6fbb"))
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_xticks(np.arange(len(parts)), names, rotation=60, fontsize=7, ha="right")
        ax.set_title(
            f"head {first['layer']}.{first['head']} ({first['value']:+.3g}) split by the key it read",
            fontsize=9,
        )
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, bbox_inches="tight")


def describe(report: dict) -> str:
    """``logit(␣Mary) − logit(␣John)``: what a report attributes, as qkv names tokens."""
    target, baseline = report["target"], report["baseline"]
    text = f"logit({visible(target['token'])})"
    return text if baseline is None else f"{text} − logit({visible(baseline['token'])})"
