"""The fused kernels' compiled functions, made on first use (numba is imported only here), and
the constant arguments they take for "none"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def constant(a):
    """a, read-only (the compiled loops take the arguments they do not write as read-only)."""
    a.flags.writeable = False
    return a


def read_only(a):
    """a as a read-only view (the compiled loops are typed for read-only K and V)."""
    return constant(a.view())


# the tile pass's arguments for "no mask", "no bias" and "no diagonal" (never read)
NO_MASK = constant(np.ones((1, 1, 1), dtype=bool))
NO_BIAS = {np.dtype(t): constant(np.zeros((1, 1, 1, 1), dtype=t)) for t in (np.float32, np.float64)}
NO_POSITIONS = constant(np.zeros(1, dtype=np.int64))

COMPILED: dict[str, Callable[..., Any]] = {}


def kernels() -> dict[str, Callable[..., Any]]:
    """The compiled functions by name, made on first use."""
    if not COMPILED:
        from qkv.kernels import decode_jit, fused_jit, strips_jit

        COMPILED.update(fused_jit.build())
        COMPILED.update(decode=decode_jit.decode, decode_step=decode_jit.decode_step)
        COMPILED.update(blas=decode_jit.functions)
        COMPILED.update(strips=strips_jit.strips)
    return COMPILED
