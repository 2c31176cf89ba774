"""Exact attention without the traced steps: the blocked NumPy kernel, torch's SDPA, the
threads they run on, and ``dispatch`` (which one runs a call)."""
