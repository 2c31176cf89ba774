"""What is watching or editing a model's attention right now: one ``Session``.

A ``ContextVar`` holds the active session (``qkv.hf.trace`` and ``qkv.hf.intervene`` set it for
their ``with`` block), so the attention function registered with transformers finds it without
state stored on the model. Layers are numbered in the order ``attention_layers`` lists them.
"""

from __future__ import annotations

import contextlib
import inspect
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_ACTIVE: ContextVar = ContextVar("qkv_hf_session", default=None)


def current():
    """The active session, or None."""
    return _ACTIVE.get()


def _calls_attention_interface(cls) -> bool:
    try:
        source = inspect.getsource(cls.forward)
    except (OSError, TypeError, AttributeError):
        return False
    return "ALL_ATTENTION_FUNCTIONS" in source or "attention_interface" in source


def attention_layers(model) -> list[tuple[str, torch.nn.Module]]:
    """(name, module) of every attention module of ``model`` (each one whose forward calls
    transformers' attention interface), in module order: layer i of the run is entry i."""
    seen: dict[type, bool] = {}
    found = []
    for name, module in model.named_modules():
        cls = type(module)
        if cls not in seen:
            seen[cls] = _calls_attention_interface(cls)
        if seen[cls]:
            found.append((name, module))
    return found


def check_uses_qkv(model) -> None:
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if impl != "qkv":
        raise ValueError(
            f"this model computes attention with {impl!r}; load it with "
            f"attn_implementation='qkv' (or call model.set_attn_implementation('qkv'))"
            f" so qkv sees every step"
        )


class Session:
    """The recorder and the edits that the attention function applies while it is active.

    ``recorder(index, module, kept, settings)`` receives every layer's steps where they were
    computed (edits, ``output_attentions``, dropout), ``recorder.record(index, p)`` the checked
    problem of a layer that ran the fast kernels; ``edits`` is a
    ``qkv.hf.interventions.Edits`` (or None); ``watch(index, module, p)`` sees every layer's
    checked problem before any step is computed. A session that only watches leaves the layers
    to the kernels (no step is kept).
    """

    def __init__(self, model, *, recorder=None, edits=None, watch=None):
        self.model = model
        self.layers = attention_layers(model)
        self.index = {id(m): i for i, (_, m) in enumerate(self.layers)}
        self.recorder = recorder
        self.edits = edits
        self.watch = watch

    @property
    def keeps_steps(self) -> bool:
        """Whether a layer's steps are recorded or edited (else the kernels compute it)."""
        return self.recorder is not None or self.edits is not None

    def see(self, module, p) -> None:
        """Show this layer's checked problem to the watcher, if any."""
        index = self.index.get(id(module))
        if self.watch is not None and index is not None:
            self.watch(index, module, p)

    def layer_call(self, module, p, kept, settings):
        """Apply this layer's edits to its steps, record them; return (kept, settings)."""
        index = self.index.get(id(module))
        if index is None:  # a module of another model: leave it alone
            return kept, settings
        if self.edits is not None:
            kept, settings = self.edits.apply(index, p, kept, settings)
        if self.recorder is not None:
            self.recorder(index, module, kept, settings)
        return kept, settings

    def record(self, module, p) -> None:
        """Hand this layer's checked problem to the recorder, which keeps it as a lazy trace
        (the model ran the fast kernels; no step was kept)."""
        index = self.index.get(id(module))
        if index is not None and self.recorder is not None:
            self.recorder.record(index, p)

    @contextlib.contextmanager
    def active(self):
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)


def joined(model, *, recorder=None, edits=None, watch=None) -> Session:
    """A session for ``model`` that keeps what an enclosing session records, edits or watches."""
    outer = current()
    if outer is not None and outer.model is model:
        recorder = recorder or outer.recorder
        edits = edits or outer.edits
        watch = watch or outer.watch
    return Session(model, recorder=recorder, edits=edits, watch=watch)
