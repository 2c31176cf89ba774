"""The ``qkv`` command: a click group whose sub-commands load only when they are used.

Each entry of ``COMMANDS`` names a click command as "module.path:attribute"; the module is
imported the first time that command (or the command list in ``qkv --help``) needs it, so a
command that pulls in torch, fastapi or matplotlib costs nothing to the others. Command modules
keep their heavy imports inside the command function.

Every failure the user can fix ends as one line ``Error: …`` with exit status 2 (``CliError``).
Commands raise CliError for their own checks; the group turns the two failures any command can
meet into one too: an optional package that is not installed (naming the extra that installs
it) and an OSError from a path the user gave (``qkv heads --png /no/such/dir/x.png``).
"""

from __future__ import annotations

import errno
import importlib

import click

from qkv.cli.errors import CliError

COMMANDS = {
    name: f"qkv.cli.{name}:{name}"
    for name in (
        "explain",
        "dims",
        "presets",
        "softmax",
        "serve",
        "heads",
        "generate",
        "lab",
        "quiz",
        "ring",
        "bench",
        "export",
        "patch",
        "attribute",
        "trace",
    )
}


class LazyGroup(click.Group):
    """A click group that imports a sub-command's module only when the command is looked up."""

    def __init__(self, *args, lazy: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx, name: str):
        if name in self.commands or name not in self.lazy:
            return super().get_command(ctx, name)
        module_name, _, attr = self.lazy[name].partition(":")
        try:
            command = getattr(importlib.import_module(module_name), attr)
        except ImportError as e:  # an optional extra is not installed
            return _unavailable(name, e)
        if not isinstance(command, click.Command):
            raise TypeError(
                f"COMMANDS[{name!r}] must name a click command, got "
                f"{type(command).__name__} at {self.lazy[name]}"
            )
        return command

    def invoke(self, ctx: click.Context):
        then = ctx.args[:1]  # after the sub-command's name: a sub-sub-command's (lab train)
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as e:
            name = ctx.invoked_subcommand
            if _root(e.name) not in EXTRAS or name is None:  # a bug, keep its traceback
                raise
            command = self.get_command(ctx, name)
            if isinstance(command, click.Group) and then and then[0] in command.commands:
                name = f"{name} {then[0]}"
            raise CliError(f"'qkv {name}' {missing_extra(e)}") from None
        except OSError as e:
            if e.errno == errno.EPIPE:  # output piped into `head`: click exits quietly
                raise
            raise CliError(os_error_text(e)) from None


def os_error_text(error: OSError) -> str:
    """ "cannot open '/no/dir/x.png': No such file or directory" (the path as the user gave it)."""
    if error.filename is None:
        return str(error.strerror or error)
    return f"cannot open {str(error.filename)!r}: {error.strerror or error}"


def _root(module: str | None) -> str:
    return (module or "").split(".")[0]


# the extra that installs each optional package a command may need
EXTRAS = {
    "torch": "torch",
    "fastapi": "web",
    "uvicorn": "web",
    "matplotlib": "plot",
    "gguf": "models",
    "safetensors": "models",
    "tokenizers": "models",
    "transformers": "hf",
}


def missing_extra(error: ImportError) -> str:
    """'needs the Python package X: pip install 'qkv[extra]'' for a missing optional package."""
    missing = error.name or str(error)
    extra = EXTRAS.get(_root(missing))
    missing = _root(missing) if extra else missing
    hint = f"pip install 'qkv[{extra}]'" if extra else f"pip install {missing}"
    return f"needs the Python package {missing!r}, which is not installed: {hint}"


def _unavailable(name: str, error: ImportError) -> click.Command:
    @click.command(
        name,
        help=f"(unavailable: {missing_extra(error)})",
        context_settings={"ignore_unknown_options": True},
    )
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def command(args):
        raise CliError(f"'qkv {name}' {missing_extra(error)}")

    return command


@click.group(
    "qkv",
    cls=LazyGroup,
    lazy=COMMANDS,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="qkv", prog_name="qkv")
@click.pass_context
def main(ctx: click.Context):
    """Query-key-value attention with every number shown.

    \b
    Examples:
      qkv explain                              the default scene, step by step
      qkv explain --preset two-token --no-scale
      qkv dims --model andrea-120m             sizes, parameters, FLOPs, memory
      qkv presets                              the built-in scenes
      qkv softmax 2 1 0                        the softmax refresher
      qkv serve --open                         the interactive simulator in your browser
      qkv export --preset bank -o bank.html    the simulator's panels in one offline HTML file
      qkv heads --model minilm-l6 --text "The bank raised rates"   a real model's heads
      qkv attribute --text "When Mary and John went to the store, John gave a drink to" \\
          --target ␣Mary --baseline ␣John          which heads wrote the next token
      qkv trace --text-file essay.txt -o essay.qkvtrace   a long text's trace, for qkv.load
      qkv lab scaling --png scaling.png        check a tutorial's claim with numbers
      qkv quiz --topic softmax                 practise: exercises with hints and a score
      qkv ring -n 2 --T 4096                   ring attention over 2 local processes
      qkv bench --quick                        qkv's kernels against NumPy and torch, timed here
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


if __name__ == "__main__":
    main()
