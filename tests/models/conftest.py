"""Real-model fixtures: each model is loaded once per test session; absent packages skip.

The float32 models (``minilm``, ``smollm2``) live in tests/conftest.py: the web tests use them too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

REFERENCE = Path(__file__).parent.parent / "fixtures" / "models_reference.npz"


def _load(name: str, dtype):
    models = pytest.importorskip("qkv.models")
    try:
        return models.load(name, dtype=dtype)
    except models.ModelNotInstalled as e:
        pytest.skip(f"{name} not available: {e}")


@pytest.fixture(scope="session")
def reference():
    """Attention probabilities, hidden states and greedy ids from transformers (float64)."""
    with np.load(REFERENCE) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def sentences(reference):
    return [str(s) for s in reference["sentences"]]


@pytest.fixture(scope="session")
def minilm64():
    return _load("minilm-l6", np.float64)


@pytest.fixture(scope="session")
def smollm2_64():
    return _load("smollm2-135m", np.float64)
