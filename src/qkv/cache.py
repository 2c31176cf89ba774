"""KVCache: keys and values kept between calls, for decoding one token (or a chunk) at a time."""

from __future__ import annotations

from qkv import checks, steps


class KVCache:
    """Keys and values of every position seen so far, along axis -2.

    Pass it as ``cache=`` to ``MultiHeadAttention``: a prefill call stores the prompt's K/V, each
    later call appends its own and attends over all of them; with ``causal=True`` (bottom-right
    alignment) this equals one causal pass over the whole sequence.

    ``capacity``: positions to make room for at the first update (e.g. prompt + new tokens),
    so a generation loop writes into one buffer and never copies it. Past the capacity (or
    without one) storage grows by doubling, so appending is amortised O(new tokens). The
    buffer's unused tail is never read: ``k``/``v`` are views of the first ``length`` rows.
    """

    def __init__(self, *, capacity: int | None = None):
        self.capacity = None if capacity is None else checks.positive_int("capacity", capacity)
        self._k = None  # (..., heads, capacity, d_k) buffer
        self._v = None  # (..., heads, capacity, d_v) buffer
        self.length = 0

    def __len__(self) -> int:
        return self.length

    def reset(self) -> None:
        self._k = self._v = None
        self.length = 0

    @property
    def k(self):
        """Cached keys (..., heads, length, d_k), or None before the first update."""
        return None if self._k is None else self._k[..., : self.length, :]

    @property
    def v(self):
        """Cached values (..., heads, length, d_v), or None before the first update."""
        return None if self._v is None else self._v[..., : self.length, :]

    @property
    def buffers(self):
        """(k, v) buffers behind ``k`` and ``v``: (..., heads, room, d) each, whose first
        ``length`` positions are the cache (the rest is unused and may hold anything); (None,
        None) before the first update. For a kernel that reads the cache in place."""
        return self._k, self._v

    def update(self, k, v):
        """Append k (..., t, d_k) and v (..., t, d_v); return all keys and values so far.

        All or nothing: the chunk is checked first (shapes against each other and the cache,
        one floating dtype, the dtype of the first chunk), and a refused chunk leaves the
        cache as it was.
        """
        self._check(k, v)
        t, n = k.shape[-2], self.length
        grown_k, grown_v = self._grown(self._k, k, t), self._grown(self._v, v, t)
        grown_k[..., n : n + t, :] = k  # (..., heads, n:n+t, d_k)
        grown_v[..., n : n + t, :] = v  # (..., heads, n:n+t, d_v)
        self._k, self._v, self.length = grown_k, grown_v, n + t
        return self.k, self.v

    def append_in_place(self, t: int, write):
        """Append t positions whose keys and values ``write(k_buffer, v_buffer, n)`` puts into
        the buffers itself, at positions n … n + t − 1 (n = ``length`` before the call), after
        room is made as ``update`` makes it; they count as cached once ``write`` returns (if it
        raises, the cache keeps its length). For a kernel that computes a step's k and v
        straight into the cache. Needs a first ``update`` (the buffers' library, dtype and
        shape come from it)."""
        t = checks.positive_int("t", t)
        if self._k is None:
            raise ValueError("append_in_place needs a cache that holds a first chunk: update first")
        self._k, self._v = self._grown(self._k, self._k, t), self._grown(self._v, self._v, t)
        write(self._k, self._v, self.length)
        self.length += t

    def _check(self, k, v):
        for name, a in (("k", k), ("v", v)):
            if getattr(a, "ndim", 0) < 2:
                raise ValueError(
                    f"{name} must have shape (..., length, d), got {tuple(getattr(a, 'shape', ()))}"
                )
        xp = steps.namespace(k, v)
        if k.dtype != v.dtype or not xp.isdtype(k.dtype, "real floating"):
            raise TypeError(
                f"k and v must share one floating dtype, got k {k.dtype} and v {v.dtype}"
            )
        if k.shape[:-1] != v.shape[:-1]:
            raise ValueError(
                f"k and v must have the same (..., length) axes, got k "
                f"{tuple(k.shape)} and v {tuple(v.shape)}"
            )
        if self._k is None:
            return
        if steps.namespace(self._k) is not xp or k.dtype != self._k.dtype:
            raise TypeError(
                f"the cache holds {type(self._k).__name__} of {self._k.dtype} (fixed "
                f"by its first chunk), got {type(k).__name__} of {k.dtype}; "
                "convert the chunk first"
            )
        for name, new, old in (("k", k, self._k), ("v", v, self._v)):
            if new.shape[:-2] != old.shape[:-2] or new.shape[-1] != old.shape[-1]:
                raise ValueError(
                    f"{name} must match the cached (..., length, d) shape "
                    f"{tuple(old.shape[:-2])} + (length, {old.shape[-1]}), "
                    f"got {tuple(new.shape)}"
                )

    def _grown(self, buf, new, t):
        """buf with room for t more positions (capacity doubles), in new's library and dtype."""
        xp = steps.namespace(new)
        need = self.length + t
        if buf is not None and buf.shape[-2] >= need:
            return buf
        first = self.capacity or 16
        capacity = max(need, 2 * buf.shape[-2] if buf is not None else first)
        shape = (*new.shape[:-2], capacity, new.shape[-1])
        grown = xp.empty(shape, dtype=new.dtype, device=steps.device(new))
        if buf is not None and self.length:
            grown[..., : self.length, :] = buf[..., : self.length, :]
        return grown
