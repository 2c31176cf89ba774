"""What a real model's forward pass hands back: one ``qkv.Trace`` per layer plus the output."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qkv import display, lazy
from qkv.lazy import LazyTrace
from qkv.tiles import held_bytes
from qkv.trace import Trace


@dataclass
class ModelTrace:
    """A text run through a model: tokens, ids, a Trace per kept layer, final hidden states.

    ``layers`` maps a layer index to that layer's attention ``Trace`` (steps x … out, heads on
    axis 0, ``tokens`` set); ``hidden`` (L, d_model) is the last layer's output (after the final
    norm for SmolLM2, as the checkpoint's reference implementation returns it), None where the
    run keeps none (a ``qkv.hf`` run).
    """

    model: str
    tokens: list[str]
    ids: list[int]
    layers: dict[int, Trace]
    hidden: np.ndarray | None

    def layer(self, index: int) -> Trace:
        if index not in self.layers:
            raise ValueError(f"layer must be one of {sorted(self.layers)}, got {index}")
        return self.layers[index]

    @property
    def weights(self) -> np.ndarray:
        """Attention weights of every kept layer: (n_layers, n_heads, L, L); refused past
        ``qkv.lazy.BUDGET`` bytes (read one layer's heads, rows or statistics instead)."""
        order = sorted(self.layers)
        if order:
            s = self.layers[order[0]].settings
            size = len(order) * (s["n_heads"] or 1) * s["L"] * s["S"] * 4
            if size > lazy.BUDGET:
                raise ValueError(
                    f"run.weights would hold {size / 1e6:,.0f} MB ({len(order)} layers × "
                    f"{s['n_heads']} heads × {s['L']} × {s['S']}), more than the "
                    f"{lazy.BUDGET / 1e6:,.0f} MB a whole read may take; read run.layer(i) with its "
                    "readers: .head(h)['weights'], .rows, .top_keys, .head_stats, .pooled"
                )
        return np.stack([self.layers[i]["weights"] for i in order])

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays this run holds (every layer's trace and ``hidden``)."""
        arrays = [self.hidden]
        for t in self.layers.values():
            arrays += held_arrays(t)
        return held_bytes(arrays)

    def save(self, path) -> int:
        """Write this run to ``path`` (``qkv.load`` reads it back): tokens, ids, and per layer
        the arrays its steps are computed from; returns the bytes written."""
        from qkv.models import saved

        return saved.save(self, path)

    @classmethod
    def load(cls, path) -> ModelTrace:
        """The run ``save`` wrote to ``path`` (``qkv.load``), every layer a lazy trace."""
        from qkv.models import saved

        return cls(*saved.load(path))

    def _repr_html_(self) -> str:
        return display.static_html("run", self)

    def to_html(self, path=None, **kwargs) -> str:
        """One self-contained HTML file of the simulator's panels for this run (every layer,
        head and token precomputed; see ``qkv.notebook.export.to_html``)."""
        return display.export_html(self, path, **kwargs)


def held_arrays(trace: Trace) -> list:
    """The arrays a layer's trace holds: a lazy trace's sources and stored steps, or every
    step of an eager one."""
    if isinstance(trace, LazyTrace):
        return [*trace.source.arrays().values(), *trace.stored.values()]
    return [*trace.steps.values(), trace.settings.get("mask")]


def token_index(tokens: list[str], select) -> int:
    """Position of a token chosen by index (an int, or a string of digits) or by text.

    Text matches a label exactly first, then with surrounding spaces stripped and case
    ignored (so "cat" finds SmolLM2's " cat" and MiniLM's "cat"); the first match wins.
    """
    n = len(tokens)
    if isinstance(select, str) and select.strip().lstrip("-").isdigit():
        select = int(select)
    if isinstance(select, (int, np.integer)) and not isinstance(select, bool):
        if not -n <= select < n:
            raise ValueError(f"token index must be in [0, {n}), got {select}")
        return int(select) % n
    if select in tokens:
        return tokens.index(select)
    loose = [t.strip().lower() for t in tokens]
    if isinstance(select, str) and select.strip().lower() in loose:
        return loose.index(select.strip().lower())
    raise ValueError(
        f"token {select!r} is not in the text; choose one of {tokens} or an index 0-{n - 1}"
    )
