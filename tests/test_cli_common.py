"""What the commands share: --json is --format json wherever --format is taken."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from qkv import cli


@pytest.mark.parametrize(
    "args", [["presets"], ["softmax", "2", "1", "0"], ["dims", "--d-model", "8", "--n-heads", "2"]]
)
def test_json_is_format_json(args):
    runner = CliRunner()
    flag = runner.invoke(cli.main, [*args, "--json"])
    long = runner.invoke(cli.main, [*args, "--format", "json"])
    assert flag.exit_code == long.exit_code == 0, flag.output
    assert flag.output == long.output and json.loads(flag.output)
