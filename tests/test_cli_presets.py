"""`qkv presets`: every scene with its lesson."""

import json

from click.testing import CliRunner

from qkv import presets
from qkv.cli import main


def test_lists_every_scene_with_its_lesson():
    result = CliRunner().invoke(main, ["presets", "--format", "plain"])
    assert result.exit_code == 0, result.output
    for name in ("cat-sat", "agreement", "bank", "two-token", "two-heads"):
        assert f"{name}: {presets.load(name).lesson}" in result.output
    assert "cat-sat (default)" in result.output


def test_json_names_the_default_and_the_heads():
    rows = json.loads(CliRunner().invoke(main, ["presets", "--format", "json"]).stdout)
    assert [r["name"] for r in rows] == ["cat-sat", "agreement", "bank", "two-token", "two-heads"]
    assert [r["name"] for r in rows if r["default"]] == ["cat-sat"]
    assert {r["name"]: r["n_heads"] for r in rows}["two-heads"] == 2
    assert rows[0]["select"] == "sat"


def test_markdown_is_a_pipe_table():
    out = CliRunner().invoke(main, ["presets", "--format", "markdown"]).output
    assert "| name | heads |" in out
    assert "| two-heads | 2 |" in out
