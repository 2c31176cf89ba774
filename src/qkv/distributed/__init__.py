"""Context-parallel attention: the sequence split across processes, K/V passed around a ring.

``ring_attention`` needs torch; it is imported on first use, so ``qkv ring --help`` stays light.
"""

__all__ = ["ring_attention"]


def __getattr__(name: str):
    if name == "ring_attention":
        from qkv.distributed.ring import ring_attention

        return ring_attention
    raise AttributeError(f"module 'qkv.distributed' has no attribute {name!r}")
