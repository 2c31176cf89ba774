import numpy as np
import pytest


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
