"""``qkv serve``: run the simulator under uvicorn and print its URL."""

from __future__ import annotations

import click

from qkv.cli.common import allow_pickle_option, local_model_or_error
from qkv.cli.errors import CliError
from qkv.web.server import DEFAULT_HOST, DEFAULT_PORT


@click.command("serve")
@click.option(
    "--host",
    default=DEFAULT_HOST,
    show_default=True,
    help="address to listen on (127.0.0.1: this machine only)",
)
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="port (0 picks a free one)",
)
@click.option("--open", "open_browser", is_flag=True, help="open the page in a web browser")
@click.option(
    "--model",
    "model_dirs",
    multiple=True,
    metavar="DIR|ID",
    help="also offer this local transformers model directory (or hub id owner/name, "
    "from the cache or downloaded) in the page's model mode, named after the "
    "directory or id (repeatable); loaded now, computed by qkv",
)
@click.option(
    "--trace",
    "trace_files",
    multiple=True,
    metavar="FILE",
    help="serve this saved run (qkv trace -o FILE): the page opens it in its model mode, "
    "its heads read from the file's q, k, v, nothing traced again (repeatable)",
)
@allow_pickle_option
def serve(
    host: str,
    port: int,
    open_browser: bool,
    model_dirs: tuple[str, ...],
    trace_files: tuple[str, ...],
    allow_pickle: bool,
) -> None:
    """Start the interactive attention simulator (a local web page).

    The page's model mode offers the bundled models and the --model directories only: a
    request can pick one of those, never name a path of its own.

    \b
    Examples:
      qkv serve                      http://127.0.0.1:8000/
      qkv serve --port 0 --open      a free port, opened in your browser
      qkv serve --model ./my-llama   the page also offers my-llama
      qkv serve --trace essay.qkvtrace   opens the saved run of essay.txt
    """
    from qkv import models
    from qkv.web.models import ModelPool
    from qkv.web.server import ServerError, run_server  # uvicorn and fastapi load here

    local = {}
    for path in model_dirs:
        m = local_model_or_error(path, allow_pickle=allow_pickle)
        if m.name in local or m.name in models.NAMES:
            raise CliError(
                f"--model {path}: a model named {m.name!r} is already offered; "
                f"give each directory its own name"
            )
        local[m.name] = m
    runs = [loaded_run(path) for path in trace_files]
    try:
        run_server(
            host,
            port,
            open_browser=open_browser,
            echo=click.echo,
            model_pool=ModelPool(local=local) if local else None,
            runs=runs,
        )
    except ServerError as e:
        raise CliError(str(e)) from None


def loaded_run(path: str):
    """The saved run at ``path`` (``qkv.load``); a CliError naming the file otherwise."""
    import qkv

    try:
        run = qkv.load(path)
    except OSError as e:
        raise CliError(f"--trace {path}: {e.strerror or e}") from None
    except ValueError as e:  # its message starts with the path
        raise CliError(f"--trace {e}") from None
    if not run.layers:
        raise CliError(f"--trace {path}: the run keeps no layer; trace it with at least one")
    return run
