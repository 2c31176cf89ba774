import contextlib
import os
import threading
import time

import numpy as np
import pytest

# Tests never pay for tile tuning: the kernels take their built-in tiles (kernels/tuning.py);
# tests/test_tuning.py runs the tuner itself, on a tiny budget, in temporary cache directories.
os.environ["QKV_TUNE"] = "off"


def pytest_sessionstart(session):
    """Load (or compile, the first time) the fused kernel's numba code once, before any test:
    "auto" picks it, and a first call inside a hypothesis test would overrun its deadline."""
    from qkv.kernels import fused

    if fused.available():
        for dtype in (np.float16, np.float32, np.float64):
            for L in (1, 40):  # the decode loop and the tiles
                x = np.ones((1, L, 4), dtype)
                fused.fused_attention(x, x, x, causal="bottom-right")


def pytest_collection_modifyitems(config, items):
    """Mark what `make fast` leaves out: tests that drive Chromium, and the schema fuzzers."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & {"browser", "page"}:
            item.add_marker(pytest.mark.browser)
        if "fuzz_examples" in names:
            item.add_marker(pytest.mark.fuzz)


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


def _serve(app):
    """Serve ``app`` with uvicorn on a free port of 127.0.0.1; yields the base URL."""
    uvicorn = pytest.importorskip("uvicorn", reason="the web extra is not installed")
    from qkv.web.server import bind, url_of

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the simulator's server did not start within 20 s")
        time.sleep(0.02)
    yield url_of(sock).rstrip("/")
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture(scope="session")
def serve():
    """serve(app): a context manager that runs ``app`` on a real uvicorn server on a free port
    of 127.0.0.1, yielding its base URL (the simulator's tests and qkv.hf's served models)."""
    return contextlib.contextmanager(_serve)
