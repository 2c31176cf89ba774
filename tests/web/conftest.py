"""Fixtures for the simulator's tests: a real uvicorn server (tests/conftest.py's ``serve``),
and Debian's Chromium driven by Playwright. Tests skip, with the reason, when a part is missing."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def fuzz_examples() -> int:
    """Cases for the schemathesis runs: QKV_FUZZ_EXAMPLES (default 2,000)."""
    return int(os.environ.get("QKV_FUZZ_EXAMPLES", "2000"))


@pytest.fixture(scope="session")
def server_url(serve):
    """Base URL (no trailing slash) of a real server started for this test session."""
    pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")
    from qkv.web.app import create_app

    with serve(create_app()) as url:
        yield url


@pytest.fixture(scope="session")
def model_server_url(minilm, smollm2, serve):
    """A real server whose model pool starts with the session's loaded models (so the weights
    are read once per test session, not once per process part)."""
    pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")
    from qkv.web.app import create_app
    from qkv.web.models import ModelPool

    pool = ModelPool(loaded={"minilm-l6": minilm, "smollm2-135m": smollm2})
    with serve(create_app(model_pool=pool)) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium under Playwright (``playwright install`` is not used)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    from qkv.web import browser as chromium

    if chromium.missing():
        pytest.skip(chromium.missing())
    with sync_api.sync_playwright() as p:
        b = chromium.chromium(p)
        yield b
        b.close()
