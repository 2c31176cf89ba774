"""``qkv serve`` / ``python -m qkv.web``: a real process that listens, prints its URL, answers."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (dev extra)")
from click.testing import CliRunner  # noqa: E402

from qkv.cli.serve import serve  # noqa: E402


def test_python_m_qkv_web_serves_and_prints_its_url():
    proc = subprocess.Popen(
        [sys.executable, "-m", "qkv.web", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, (
            f"no URL printed, got {line!r}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
        )
        assert int(match.group(1)) > 0
        r = httpx.get(match.group(0) + "api/presets", timeout=20)
        assert r.status_code == 200 and r.json()[0]["name"] == "cat-sat"
        page = httpx.get(match.group(0), timeout=20)
        assert "<title>qkv · attention simulator</title>" in page.text
    finally:
        proc.terminate()
        proc.wait(timeout=20)


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
