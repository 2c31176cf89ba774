"""The benchmark: qkv's kernels against naive NumPy and torch on this machine (``qkv bench``)."""
