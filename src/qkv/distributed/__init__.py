"""Context-parallel attention: the sequence split across processes, K/V passed around a ring."""

from qkv.distributed.ring import ring_attention

__all__ = ["ring_attention"]
