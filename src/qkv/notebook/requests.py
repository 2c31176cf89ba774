"""What the widget's view asks the kernel for, through anywidget's custom messages, and the
answers: a request is ``{"id": n, "ask": kind, ...arguments}``; its answer is a JSON header
with the same id and binary buffers (``widget.send(header, buffers)``), or
``{"id": n, "error": message}``. Only what the view draws travels, never a whole trace.

Kinds: ``hello`` (the view checks that a kernel answers; the header says which widget).
"""

from __future__ import annotations

from collections.abc import Callable


def _hello(widget, content: dict) -> tuple[dict, list[bytes]]:
    return {"widget": type(widget).__name__}, []


ASKS: dict[str, Callable] = {"hello": _hello}


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
