"""qkv: query-key-value attention you can see every number of."""

from qkv import masks
from qkv.attention import attention, attention_weights
from qkv.cache import KVCache
from qkv.explain import dims
from qkv.explain import scenes as presets
from qkv.multihead import MultiHeadAttention
from qkv.trace import STEPS, Trace

__all__ = ["attention", "attention_weights", "MultiHeadAttention", "KVCache", "Trace", "STEPS",
           "masks", "presets", "dims"]
__version__ = "0.1.0"
