"""How an engine object shows itself in a notebook and as an HTML file, without the engine
importing the layers that draw it: those layers register their drawing functions here when they
are imported (``qkv.explain`` the static HTML, ``qkv.notebook`` the self-contained export), and
``import qkv`` imports both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_static: dict[str, Callable[[Any], str]] = {}
_exporter: list[Callable[..., str]] = []


def register_static(kind: str, draw: Callable[[Any], str]) -> None:
    """``draw(obj)`` is the static HTML (``_repr_html_``) of objects of ``kind``: "trace",
    "scene" or "run"."""
    _static[kind] = draw


def register_exporter(export: Callable[..., str]) -> None:
    """``export(obj, path, **options)`` writes one self-contained HTML file of any kind."""
    _exporter[:] = [export]


def static_html(kind: str, obj) -> str:
    """The static HTML of ``obj`` by the drawing registered for ``kind``."""
    if kind not in _static:
        raise LookupError(f"no static HTML registered for {kind!r}: import qkv first")
    return _static[kind](obj)


def export_html(obj, path=None, **options) -> str:
    """One self-contained HTML file of ``obj`` by the registered exporter."""
    if not _exporter:
        raise LookupError("no HTML exporter registered: import qkv first")
    return _exporter[0](obj, path, **options)
