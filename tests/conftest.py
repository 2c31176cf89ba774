import numpy as np
import pytest


def pytest_sessionstart(session):
    """Load (or compile, the first time) the fused kernel's numba code once, before any test:
    "auto" picks it, and a first call inside a hypothesis test would overrun its deadline."""
    from qkv.kernels import fused

    if fused.available():
        for dtype in (np.float16, np.float32, np.float64):
            for L in (1, 40):  # the decode loop and the tiles
                x = np.ones((1, L, 4), dtype)
                fused.fused_attention(x, x, x, causal="bottom-right")


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


def _load_model(name: str):
    models = pytest.importorskip("qkv.models")
    try:
        return models.load(name, dtype=np.float32)
    except models.ModelNotInstalled as e:
        pytest.skip(f"{name} not available: {e}")


@pytest.fixture(scope="session")
def minilm():
    """MiniLM-L6 in float32, loaded once per session (skips when its package is missing)."""
    return _load_model("minilm-l6")


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M in float32, loaded once per session (skips when its package is missing)."""
    return _load_model("smollm2-135m")
