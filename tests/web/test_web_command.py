"""``qkv serve`` / ``python -m qkv.web``: a real process that listens, prints its URL, answers."""

from __future__ import annotations

import socket
import sys

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (dev extra)")
from click.testing import CliRunner  # noqa: E402
from server_process import server_process  # noqa: E402

from qkv.cli.serve import serve  # noqa: E402


def test_python_m_qkv_web_serves_and_prints_its_url():
    with server_process([sys.executable, "-m", "qkv.web", "--port", "0"]) as (_, url):
        assert int(url.rsplit(":", 1)[1]) > 0
        r = httpx.get(url + "/api/presets", timeout=20)
        assert r.status_code == 200 and r.json()[0]["name"] == "cat-sat"
        page = httpx.get(url + "/", timeout=20)
        assert "<title>qkv · attention simulator</title>" in page.text


def test_serve_options_and_defaults():
    result = CliRunner().invoke(serve, ["--help"])
    assert result.exit_code == 0
    for words in ("--host", "127.0.0.1", "--port", "8000", "--open"):
        assert words in result.output


def test_serve_reports_a_busy_port_clearly():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = CliRunner().invoke(serve, ["--port", str(port)])
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.output


def test_serve_rejects_a_bad_port():
    result = CliRunner().invoke(serve, ["--port", "70000"])
    assert result.exit_code == 2 and "70000" in result.output
