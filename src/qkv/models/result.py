"""What a real model's forward pass hands back: one ``qkv.Trace`` per layer plus the output."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qkv import display
from qkv.trace import Trace

# Steps whose axis -2 runs over positions, and those whose axis -1 does too (keys).
_KEY_AXIS = ("scores", "scaled", "tempered", "masked", "weights")


@dataclass
class ModelTrace:
    """A text run through a model: tokens, ids, a Trace per kept layer, final hidden states.

    ``layers`` maps a layer index to that layer's attention ``Trace`` (steps x … out, heads on
    axis 0, ``tokens`` set); ``hidden`` (L, d_model) is the last layer's output (after the final
    norm for SmolLM2, as the checkpoint's reference implementation returns it).
    """

    model: str
    tokens: list[str]
    ids: list[int]
    layers: dict[int, Trace]
    hidden: np.ndarray

    def layer(self, index: int) -> Trace:
        if index not in self.layers:
            raise ValueError(f"layer must be one of {sorted(self.layers)}, got {index}")
        return self.layers[index]

    @property
    def weights(self) -> np.ndarray:
        """Attention weights of every kept layer: (n_layers, n_heads, L, L)."""
        return np.stack([self.layers[i]["weights"] for i in sorted(self.layers)])

    def _repr_html_(self) -> str:
        return display.static_html("run", self)

    def to_html(self, path=None, **kwargs) -> str:
        """One self-contained HTML file of the simulator's panels for this run (every layer,
        head and token precomputed; see ``qkv.notebook.export.to_html``)."""
        return display.export_html(self, path, **kwargs)


def one_sequence(trace: Trace, b: int, n: int, tokens: list[str]) -> Trace:
    """Sequence ``b`` of a batched trace, cut to its ``n`` real positions (padding dropped)."""
    steps = {}
    for name, a in trace.steps.items():
        a = a[b, ..., :n, :]  # (..., n, last)
        steps[name] = a[..., :n] if name in _KEY_AXIS else a
    settings = dict(trace.settings, L=n, S=n)
    mask = settings.get("mask")
    if mask is not None:
        # the same for every head in these models: keep one (n, n) mask
        mask = np.broadcast_to(mask, trace.steps["weights"].shape)[b, 0, :n, :n]
        settings["mask"] = np.ascontiguousarray(mask)
    return Trace(steps, settings, tokens=list(tokens))


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
