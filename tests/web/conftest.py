"""Fixtures for the simulator's tests: a real uvicorn server on an ephemeral port of 127.0.0.1,
and Debian's Chromium driven by Playwright. Tests skip, with the reason, when a part is missing."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--disable-quic"]


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
def fuzz_examples() -> int:
    """Cases for the schemathesis runs: QKV_FUZZ_EXAMPLES (default 2,000)."""
    return int(os.environ.get("QKV_FUZZ_EXAMPLES", "2000"))


@pytest.fixture(scope="session")
def serve():
    """serve(app): a context manager that runs ``app`` on a real server, yielding its URL."""
    return contextlib.contextmanager(_serve)


@pytest.fixture(scope="session")
def server_url():
    """Base URL (no trailing slash) of a real server started for this test session."""
    pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")
    from qkv.web.app import create_app

    yield from _serve(create_app())


@pytest.fixture(scope="session")
def model_server_url(minilm, smollm2):
    """A real server whose model pool starts with the session's loaded models (so the weights
    are read once per test session, not once per process part)."""
    pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")
    from qkv.web.app import create_app
    from qkv.web.models import ModelPool

    pool = ModelPool(loaded={"minilm-l6": minilm, "smollm2-135m": smollm2})
    yield from _serve(create_app(model_pool=pool))


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium under Playwright (``playwright install`` is not used)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield b
        b.close()
