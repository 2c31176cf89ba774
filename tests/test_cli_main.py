"""The `qkv` group: help, lazy loading, every sub-command's help."""

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from qkv import cli


def test_no_subcommand_prints_help_and_exits_0():
    result = CliRunner().invoke(cli.main, [])
    assert result.exit_code == 0
    assert "Usage: qkv" in result.output
    for name in ("explain", "dims", "presets", "softmax"):
        assert f"  {name}  " in result.output


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_resolves_and_its_help_has_an_example(name):
    ctx = click.Context(cli.main)
    assert isinstance(cli.main.get_command(ctx, name), click.Command)
    result = CliRunner().invoke(cli.main, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert f"Usage: qkv {name}" in result.output
    assert "Example" in result.output


def test_help_imports_no_heavy_module():
    code = (
        "import sys\nfrom qkv.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ['torch', 'matplotlib', 'fastapi', 'uvicorn', 'rich']\n"
        "print('LOADED', [m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "LOADED []" in out.stdout, out.stdout


def test_a_command_whose_module_is_missing_explains_itself():
    group = cli.LazyGroup("qkv", lazy={"ghost": "qkv.no_such_module:ghost"})
    listing = CliRunner().invoke(group, ["--help"])
    assert listing.exit_code == 0 and "unavailable" in listing.output
    result = CliRunner().invoke(group, ["ghost", "x"])
    assert result.exit_code != 0
    assert "qkv.no_such_module" in result.output


def test_a_command_entry_that_is_not_a_command_is_refused():
    group = cli.LazyGroup("qkv", lazy={"bad": "qkv.cli:COMMANDS"})
    with pytest.raises(TypeError, match="must name a click command"):
        group.get_command(click.Context(group), "bad")


def test_unknown_subcommand_exits_2():
    result = CliRunner().invoke(cli.main, ["nope"])
    assert result.exit_code == 2
    assert "No such command 'nope'" in result.output
