"""``qkv serve``: run the simulator under uvicorn and print its URL."""

from __future__ import annotations

import click

from qkv.cli.errors import CliError
from qkv.web.server import DEFAULT_HOST, DEFAULT_PORT


@click.command("serve")
@click.option("--host", default=DEFAULT_HOST, show_default=True,
              help="address to listen on (127.0.0.1: this machine only)")
@click.option("--port", default=DEFAULT_PORT, show_default=True,
              type=click.IntRange(0, 65535), help="port (0 picks a free one)")
@click.option("--open", "open_browser", is_flag=True, help="open the page in a web browser")
def serve(host: str, port: int, open_browser: bool) -> None:
    """Start the interactive attention simulator (a local web page).

    \b
    Examples:
      qkv serve                      http://127.0.0.1:8000/
      qkv serve --port 0 --open      a free port, opened in your browser
    """
    from qkv.web.server import ServerError, run_server  # uvicorn and fastapi load here

    try:
        run_server(host, port, open_browser=open_browser, echo=click.echo)
    except ServerError as e:
        raise CliError(str(e)) from None
