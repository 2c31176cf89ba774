"""Serving the simulator: a listening socket, its URL, and uvicorn running the app on it."""

from __future__ import annotations

import socket
import threading
import webbrowser


class ServerError(OSError):
    """The server cannot start (the address is taken or not ours)."""


DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8000


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); port 0 picks a free one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ServerError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def run_server(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    open_browser=False,
    echo=print,
    model_pool=None,
    runs=(),
) -> None:
    """Serve the simulator until interrupted (Ctrl-C); ``model_pool``, ``runs``: see
    ``create_app``."""
    import uvicorn

    from qkv.web.app import create_app

    sock = bind(host, port)
    url = url_of(sock)
    server = uvicorn.Server(
        uvicorn.Config(create_app(model_pool=model_pool, runs=runs), log_level="warning")
    )
    echo(f"qkv simulator: {url}  (Ctrl-C stops it)")
    if open_browser:
        threading.Timer(0.5, webbrowser.open, [url]).start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
