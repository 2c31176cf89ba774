"""What the widget's view asks the kernel for, through anywidget's custom messages, and the
answers: a request is ``{"id": n, "ask": kind, ...arguments}``; its answer is a JSON header
with the same id and binary buffers (``widget.send(header, buffers)``), or
``{"id": n, "error": message}``. Only what the view draws travels, never a whole trace.

Kinds: ``hello`` (the view checks that a kernel answers); the zooming heatmap's
(``views.zoom``; each names ``layer``, ``head``, ``temperature`` and ``step``, default the
widget's own): ``overview``, ``window`` (``r0``, ``r1``, ``c0``, ``c1``), ``row`` (``q``),
``search`` (``text``); and ``thumbnails`` (every head of a model's run pooled to ``size``, 32
by default: the grid panel asks when it opens).
"""

from __future__ import annotations

from collections.abc import Callable

from qkv.views import zoom

THUMBS = 32  # cells a side of a thumbnail: the grid draws them 30–40 px wide


def _hello(widget, content: dict) -> tuple[dict, list[bytes]]:
    return {"widget": type(widget).__name__}, []


def _shown(widget, content: dict):
    """(trace, head) of the head a request names, checked as the widget checks its traits."""
    now = widget._choice()
    choice = {
        "select": now["select"],
        "temperature": float(content.get("temperature", now["temperature"])),
        "head": content.get("head", now["head"]),
        "layer": content.get("layer", now["layer"]),
    }
    widget.view.check(**choice)
    del choice["select"]
    return widget.view.shown(**choice)


def _step(content: dict) -> str:
    return content.get("step", "weights")


def _overview(widget, content):
    tr, h = _shown(widget, content)
    return zoom.overview(tr, h, content.get("size", zoom.OVERVIEW), step=_step(content)).buffers()


def _window(widget, content):
    tr, h = _shown(widget, content)
    box = [content.get(k) for k in ("r0", "r1", "c0", "c1")]
    return zoom.window(tr, h, *box, step=_step(content)).buffers()


def _row(widget, content):
    tr, h = _shown(widget, content)
    return zoom.row(tr, h, content.get("q")).buffers()


def _search(widget, content):
    return zoom.search(widget.view.tokens, content.get("text")), []


def _thumbnails(widget, content):
    run = getattr(widget.view, "run", None)
    if run is None:
        raise ValueError("thumbnails are every head of a model's run; this view has one trace")
    size = content.get("size", THUMBS)
    return widget.view.thumbnails(size).buffers()


ASKS: dict[str, Callable] = {
    "hello": _hello,
    "overview": _overview,
    "window": _window,
    "row": _row,
    "search": _search,
    "thumbnails": _thumbnails,
}


def answer(widget, content) -> tuple[dict, list[bytes]]:
    """The answer to one request: (header, buffers); a bad request gets an error header naming
    what was expected, never an exception in the kernel."""
    if not isinstance(content, dict):
        return {"error": f"a request is a JSON object, got {type(content).__name__}"}, []
    rid, kind = content.get("id"), content.get("ask")
    handle = ASKS.get(kind) if isinstance(kind, str) else None
    if handle is None:
        return {"id": rid, "error": f"ask must be one of {sorted(ASKS)}, got {kind!r}"}, []
    try:
        header, buffers = handle(widget, content)
    except (ValueError, TypeError, KeyError, IndexError) as e:
        return {"id": rid, "ask": kind, "error": str(e)}, []
    return {"id": rid, "ask": kind, **header}, buffers
