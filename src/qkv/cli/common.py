"""What the sub-commands share: the --format option, printing sections, checked numbers, seeds
and paths, and loading a real model with a spinner."""

from __future__ import annotations

import math
import sys

import click

from qkv.cli.errors import CliError

FORMATS = ("rich", "plain", "markdown", "json")
SEED = click.IntRange(0, 2**32 - 1)  # what every seeded generator (NumPy, torch) accepts


class FilePath(click.Path):
    """A file path option (``click.Path(dir_okay=False)``) that refuses an empty string, which
    would otherwise read as "not given"."""

    def __init__(self, **kwargs):
        super().__init__(dir_okay=False, **kwargs)

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail(f"expected a file path, got {value!r}", param, ctx)
        return super().convert(value, param, ctx)


def format_option(*, json_ok: bool = True):
    """The --format option every command shares."""
    choices = FORMATS if json_ok else FORMATS[:-1]
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default="rich",
        show_default=True,
        help="rich: tables for the terminal (no colour codes when piped); plain: text; "
        "markdown: for docs"
        + ("; json: machine-readable." if json_ok else ".")
        + "  Example: --format markdown",
    )


def echo_sections(sections, fmt: str) -> None:
    """Print report sections as plain text, Markdown, or rich tables."""
    from qkv.explain.format import render_markdown, render_plain

    if fmt == "plain":
        click.echo(render_plain(sections).rstrip("\n"))
    elif fmt == "markdown":
        click.echo(render_markdown(sections).rstrip("\n"))
    else:
        from rich.console import Console

        from qkv.explain.format import render_rich

        stream = sys.stdout  # read at call time: click's test runner swaps it
        tty = stream.isatty()
        render_rich(
            sections,
            Console(file=stream, highlight=False, width=None if tty else 160, force_terminal=tty),
        )


def positive_float(name: str, value: float) -> float:
    """value if it is finite and > 0, else a one-line CliError naming the option."""
    if not (math.isfinite(value) and value > 0):
        raise CliError(f"{name} must be a finite number > 0, got {value}")
    return value


def require(*packages: str) -> None:
    """Import optional packages up front, so a missing one is reported (the group names its
    extra) before any output or work starts."""
    import importlib

    for package in packages:
        importlib.import_module(package)


def load_model(name: str):
    """Load a real model by name, with a spinner on stderr (tests replace this with loaded ones)."""
    from rich.console import Console

    from qkv import models

    with Console(stderr=True).status(f"loading {name} (reading and converting its weights)…"):
        return models.load(name)


def model_or_error(name: str):
    """``load_model(name)``, or a CliError naming the package to install when it is missing."""
    from qkv.models import ModelNotInstalled

    try:
        return load_model(name)
    except ModelNotInstalled as e:
        raise CliError(str(e)) from None


def local_model_or_error(path: str, *, allow_pickle: bool = False):
    """A local transformers model directory or hub id as a ``qkv.hf.local.LocalModel``
    (computed and traced by qkv's engine), or a one-line CliError: not a model, pickle weights
    without --allow-pickle, or transformers not installed (naming the extra)."""
    try:
        from qkv.hf import local
    except ImportError as e:  # qkv.hf names the extra: pip install 'qkv[hf]'
        raise CliError(f"--model {path}: {e}") from None
    from rich.console import Console

    try:
        with Console(stderr=True).status(f"loading {path}…"):
            return local.open_dir(path, allow_pickle=allow_pickle)
    except ValueError as e:
        raise CliError(str(e)) from None
