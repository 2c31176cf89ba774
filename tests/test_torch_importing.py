"""NumPy attention while another thread is still importing torch (a server loading a model
beside a scene's request): torch sits in ``sys.modules`` half-made, without ``Tensor`` yet, and
NumPy inputs must neither ask it nor fail."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHECK = textwrap.dedent(
    """
    import sys, types
    import numpy as np
    import qkv

    # what `import torch` leaves in sys.modules before its body has defined Tensor
    sys.modules["torch"] = types.ModuleType("torch")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 5, 4)) for _ in range(3))
    s = q @ k.transpose(0, 2, 1) / 2.0 + np.triu(np.full((5, 5), -np.inf), 1)
    w = np.exp(s - s.max(-1, keepdims=True))
    want = (w / w.sum(-1, keepdims=True)) @ v
    for backend in ("auto", "reference", "blocked"):
        z = qkv.attention(q, k, v, causal=True, backend=backend)
        assert np.abs(z - want).max() < 1e-12, backend
    z, tr = qkv.attention(q, k, v, causal=True, return_trace=True)
    assert np.abs(tr["weights"] - w / w.sum(-1, keepdims=True)).max() < 1e-12
    print("ok")
    """
)


def test_numpy_attention_runs_while_torch_is_half_imported():
    proc = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
