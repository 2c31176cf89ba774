"""How the simulator's API answers bad requests: a 4xx JSON body naming the field,
{"message": "field: what was expected, what came", "detail": [...]}, never a 5xx.

A message quotes at most ECHO_CHARS characters of what the client sent (``shown``), so an
error is never a way to make the server repeat a long input back; an answer names at most
MAX_ITEMS problems (and says how many more there were), each with at most MAX_LOC parts of its
field's path and MAX_MSG characters of message, so it stays a few KB whatever the request."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

ECHO_CHARS = 200
MAX_ITEMS = 5  # problems named in one answer
MAX_LOC = 8  # parts of a field's path (body.W_Q.7.63.63 is 5)
MAX_MSG = 300  # characters of one problem's message


def shown(value, limit: int = ECHO_CHARS) -> str:
    """repr(value), cut to ``limit`` characters with the full length said when it is longer."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


class FieldError(ValueError):
    """A request that is well-formed JSON but does not fit together; names the field."""

    def __init__(self, field: str, message: str, status: int = 422):
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


def error_response(status: int, items: list[dict], *, more: int = 0) -> JSONResponse:
    """The one error shape; ``items`` past MAX_ITEMS are counted, not named (``more`` counts
    problems already left out)."""
    more += max(0, len(items) - MAX_ITEMS)
    items = [
        {**e, "loc": _short(list(e.get("loc", ()))), "msg": _cut(str(e.get("msg", "")))}
        for e in items[:MAX_ITEMS]
    ]
    message = "; ".join(f"{_where(e['loc'])}: {e['msg']}" if e["loc"] else e["msg"] for e in items)
    if more:
        message += f"; and {more:,} more problem{'s' if more > 1 else ''}"
    return JSONResponse({"message": message, "detail": items}, status_code=status)


def _short(loc: list) -> list:
    """At most MAX_LOC parts of a field's path, each name clipped; '…' marks a cut."""
    loc = [_clip(p) if isinstance(p, str) else p for p in loc]
    return loc if len(loc) <= MAX_LOC else [*loc[: MAX_LOC - 1], "…"]


def _cut(msg: str) -> str:
    return msg if len(msg) <= MAX_MSG else f"{msg[:MAX_MSG]}…"


def _where(loc) -> str:
    parts = [_clip(str(p)) for p in loc if p not in ("body", "path", "query")]
    return ".".join(parts) or "body"


def _clip(name: str, limit: int = 64) -> str:
    """A field name from the request (an unexpected key can be any length)."""
    return name if len(name) <= limit else f"{name[:limit]}…"


def install(app: FastAPI) -> None:
    """Answer validation errors, FieldErrors and HTTP errors in the one JSON shape."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        found = exc.errors()
        items = [
            {"loc": e.get("loc", ()), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in found[:MAX_ITEMS]
        ]
        return error_response(422, items, more=len(found) - len(items))

    @app.exception_handler(FieldError)
    async def field_error(request: Request, exc: FieldError):
        return error_response(
            exc.status, [{"loc": ["body", exc.field], "msg": exc.message, "type": "value_error"}]
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return error_response(
            exc.status_code, [{"loc": [], "msg": str(exc.detail), "type": "http"}]
        )
