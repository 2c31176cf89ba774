"""qkv: query-key-value attention you can see every number of."""

from qkv import masks
from qkv import notebook as _notebook  # noqa: F401 - registers the HTML export; no anywidget
from qkv.attention import attention, attention_weights
from qkv.cache import KVCache
from qkv.explain import dims
from qkv.explain import scenes as presets
from qkv.multihead import MultiHeadAttention
from qkv.trace import STEPS, Trace

__all__ = [
    "attention",
    "attention_weights",
    "MultiHeadAttention",
    "KVCache",
    "Trace",
    "STEPS",
    "masks",
    "presets",
    "dims",
    "show",
    "load",
]
__version__ = "0.1.0"


def load(path):
    """A model run saved with ``run.save(path)`` or ``qkv trace -o FILE``: a
    ``qkv.models.ModelTrace`` whose layers are lazy traces (``qkv.lazy.LazyTrace``)."""
    from qkv.models.result import ModelTrace

    return ModelTrace.load(path)


def __getattr__(name: str):
    # qkv.show (the notebook widget) loads on first use: `import qkv` needs no anywidget
    if name == "show":
        from qkv.notebook import show

        return show
    raise AttributeError(f"module 'qkv' has no attribute {name!r}")
