"""What the sub-commands share: the --format, --json, --model, --temperature, --seed, --png,
--heads/--d and --layer/--output options, counts and numbers checked by ``qkv.checks``, printing
sections, paths, and loading a real model with a spinner."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable

import click

from qkv import checks
from qkv.cli.errors import CliError

FORMATS = ("rich", "plain", "markdown", "json")
TEXT_FILE_BYTES = 8 << 20  # a model's whole context (8,192 tokens) is ~40 kB of text
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
    """The --format option every command shares, and --json (the same as --format json)."""
    choices = FORMATS if json_ok else FORMATS[:-1]
    option = click.option(
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
    if not json_ok:
        return option

    def decorate(f):
        @functools.wraps(f)
        def command(*args, as_json=False, **kwargs):
            if as_json:
                kwargs["fmt"] = "json"
            return f(*args, **kwargs)

        return option(json_option(command))

    return decorate


def json_option(f=None, *, help: str = "Print JSON instead of tables (--format json)."):
    """--json: print machine-readable JSON instead of tables (the command gets ``as_json``);
    ``@json_option`` as it is, or ``@json_option(help=...)`` in the command's own words."""
    option = click.option("--json", "as_json", is_flag=True, help=help)
    return option if f is None else option(f)


def count_option(*decls: str, default: int | None, help: str | None = None, most=None, **extra):
    """An option that counts something: a whole number from 1 (to ``most``), default shown."""
    return click.option(
        *decls,
        default=default,
        show_default=default is not None,
        type=click.IntRange(1, most),
        help=help,
        **extra,
    )


def number_option(*decls: str, help: str, default=None, metavar=None, **rule):
    """An option whose value is a number checked like ``Number(**rule)`` (``above=``,
    ``at_least=``), its default shown when it has one."""
    return click.option(
        *decls,
        type=Number(**rule),
        default=default,
        show_default=default is not None,
        metavar=metavar,
        help=help,
    )


def seed_option(help: str, *, default: int | None = 0):
    """--seed N: a seed every seeded generator accepts (``SEED``), default shown when given."""
    return click.option(
        "--seed", default=default, show_default=default is not None, type=SEED, help=help
    )


def flag(name: str, help: str):
    """A yes/no option: on when given, off when not."""
    return click.option(name, is_flag=True, help=help)


def png_option(help: str):
    """--png FILE: also draw a figure into this PNG (the command gets ``png``)."""
    return click.option("--png", type=FilePath(writable=True), default=None, help=help)


def head_shape_options(*, heads: int):
    """--heads H (default ``heads``) and --d D (default 64): the heads and the features per
    head of the attention a command runs."""

    def decorate(f):
        f = count_option("--d", "d", default=64, help="Features per head (d_k = d_v).")(f)
        return count_option("--heads", default=heads, help="Attention heads.")(f)

    return decorate


def trace_file_options(what: str, layer_help: str):
    """--layer L (repeat; the command gets ``layers``) and -o/--output FILE, the ``what``
    file to write."""

    def decorate(f):
        f = click.option(
            "-o",
            "--output",
            required=True,
            type=FilePath(writable=True),
            help=f"the {what} file to write",
        )(f)
        return click.option("--layer", "layers", type=int, multiple=True, help=layer_help)(f)

    return decorate


def text_options(help_text: str):
    """--text TEXT and --text-file FILE (``-`` reads standard input): the command gets ``text``,
    the file's UTF-8 text (a final newline dropped), or None when neither is given."""

    def decorate(f):
        @functools.wraps(f)
        def command(*args, text_file=None, **kwargs):
            if text_file is not None:
                if kwargs.get("text") is not None:
                    raise CliError("give --text or --text-file, not both")
                kwargs["text"] = read_text(text_file, "--text-file")
            return f(*args, **kwargs)

        command = click.option(
            "--text-file",
            "text_file",
            type=click.Path(dir_okay=False, allow_dash=True),
            metavar="FILE",
            help="Read the text from FILE (UTF-8; - reads standard input) instead of --text.",
        )(command)
        return click.option("--text", metavar="TEXT", help=help_text)(command)

    return decorate


def read_text(path: str, option: str) -> str:
    """The UTF-8 text of ``path`` (``-``: standard input), at most ``TEXT_FILE_BYTES``, with one
    final newline dropped; a CliError naming ``option`` otherwise."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(TEXT_FILE_BYTES + 1)  # read at call time (test runners)
        else:
            with open(path, "rb") as f:
                data = f.read(TEXT_FILE_BYTES + 1)
    except OSError as e:
        raise CliError(f"{option}: cannot open {path!r}: {e.strerror or e}") from None
    if len(data) > TEXT_FILE_BYTES:
        raise CliError(f"{option} {path}: more than {TEXT_FILE_BYTES >> 20} MB of text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CliError(f"{option} {path}: not UTF-8 text (byte {e.start})") from None
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


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


def checked(check: Callable[..., float], value, name: str) -> float:
    """``check(value, name)``, a rule of ``qkv.checks``, on what the user typed (text is read as
    a number first); its message as a one-line CliError otherwise."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    try:
        return check(value, name)
    except (TypeError, ValueError) as e:
        raise CliError(str(e)) from None


class Number(click.ParamType):
    """An option's number, checked by ``check`` (``checks.number`` by default, with ``rule``:
    ``above=``, ``at_least=``); a bad one is one line naming the option (or ``name``)."""

    name = "number"

    def __init__(self, check: Callable[..., float] = checks.number, *, name=None, **rule):
        self.check = functools.partial(check, **rule) if rule else check
        self.label = name

    def convert(self, value, param, ctx):
        name = self.label or (param.opts[0] if param is not None and param.opts else "value")
        return checked(self.check, value, name)


TAU = Number(checks.temperature_value)  # τ: finite and > 0


def temperature_option(help_text: str):
    """--temperature/-t T (default 1): τ, which divides the scaled scores."""
    return click.option(
        "--temperature", "-t", type=TAU, default=1.0, show_default=True, metavar="T",
        help=help_text,
    )  # fmt: skip


def allow_pickle_option(f):
    """--allow-pickle: the command gets ``allow_pickle``."""
    return click.option(
        "--allow-pickle",
        is_flag=True,
        help="let --model DIR load pickle .bin weights (they can run code) when it has no "
        ".safetensors",
    )(f)


def model_options(dest: str, *, default: str, bundled: str):
    """--model NAME|DIR|ID (the command gets ``dest``): a bundled model (``bundled`` names
    them), a local transformers directory or a hub id; and --allow-pickle."""

    def decorate(f):
        return click.option(
            "--model",
            dest,
            default=default,
            show_default=True,
            metavar="NAME|DIR|ID",
            help=f"a bundled model ({bundled}), a local transformers model directory, or a hub "
            "id (owner/name: the local cache, else downloaded)",
        )(allow_pickle_option(f))

    return decorate


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


def any_model_or_error(name: str, *, allow_pickle: bool = False):
    """A bundled model by name (``model_or_error``), else a local transformers directory or
    hub id (``local_model_or_error``)."""
    from qkv import models

    if name in models.NAMES:
        return model_or_error(name)
    return local_model_or_error(name, allow_pickle=allow_pickle)


@contextlib.contextmanager
def transformers_run(spec: str, text: str):
    """Around loading model ``spec`` with ``qkv.hf.loading`` and running it on ``text``: the
    hf extra and a non-blank text checked first; then a ValueError, or the checkpoint's own
    code failing on the text, as a one-line CliError."""
    try:
        from qkv.hf import local
    except ImportError as e:  # qkv.hf names the extra: pip install 'qkv[hf]'
        raise CliError(str(e)) from None
    if not text.strip():
        raise CliError("--text must contain at least one non-space character")
    try:
        yield
    except ValueError as e:
        raise CliError(str(e)) from None
    except local.RUN_ERRORS as e:  # the checkpoint's own code failed on this text
        raise CliError(local.could_not_run(spec, e)) from None
