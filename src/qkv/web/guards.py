"""ASGI middleware around the whole simulator app, one concern each:

SecurityHeaders   the page loads nothing from anywhere but this server
HeadAsGet         HEAD is answered like GET (same status and headers, no body)
BodyLimit         a request body past ``max_bytes`` is a 413 in the API's JSON error shape,
                  whether its Content-Length says so or its streamed chunks add up to it
KnownKeys         a JSON body with keys its route's request schema does not have is a 422
                  naming the first few, before the body is validated
"""

from __future__ import annotations

import json
import re
import typing
from itertools import islice

from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from qkv.web.errors import MAX_ITEMS, error_response

KEY_END = re.compile(rb'"\s*:')  # where a JSON object's key ends (or a string holding '":')
FEW_KEYS = 64  # more keys than any request of this API holds

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every HTTP response."""

    def __init__(self, app):
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HeadAsGet:
    """Runs a HEAD request as GET and drops the body, so every GET route answers HEAD."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)

        async def headers_only(message):
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


class BodyTooLarge(HTTPException):
    """Raised while reading a body past the limit; the app's handler answers it as JSON."""

    def __init__(self, size: int | None, limit: int):
        said = "over the limit" if size is None else f"{size:,} bytes"
        super().__init__(
            413, f"the request body is {said}; this server reads at most {limit:,} bytes"
        )


class BodyLimit:
    """413 for a request body over ``max_bytes``, in the API's JSON error shape."""

    def __init__(self, app, *, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    def too_large(self, size: int | None):
        e = BodyTooLarge(size, self.max_bytes)
        return error_response(413, [{"loc": [], "msg": e.detail, "type": "http"}])

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers", ())).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self.too_large(int(declared))(scope, receive, send)
        total, started = 0, False

        async def limited_receive():
            nonlocal total
            message = await receive()
            if message["type"] == "http.request":
                total += len(message.get("body", b""))
                if total > self.max_bytes:
                    raise BodyTooLarge(None, self.max_bytes)
            return message

        async def noting_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, noting_send)
        except BodyTooLarge:  # raised where no exception handler saw it
            if started:
                raise
            await self.too_large(None)(scope, receive, send)


class KnownKeys:
    """422 for a JSON body with keys its route's request model (or a model one of its fields
    holds) forbids, naming the first MAX_ITEMS and counting the rest — before validation, so
    300,000 unknown keys cost one set difference, not 300,000 validation errors. Other bodies
    go on unchanged. ``api``: the FastAPI app, whose routes are read on the first request.

    Each key of a JSON object is a string followed by a colon, so the matches of KEY_END bound
    the number of keys; a body with at most FEW_KEYS of them is left to validation unparsed
    (its errors are few), so a legitimate request is not parsed twice."""

    def __init__(self, app, *, api):
        self.app, self.api = app, api
        self.routes: list | None = None  # (path regex, methods, request model)

    def model_of(self, scope) -> type[BaseModel] | None:
        if self.routes is None:
            self.routes = [
                (r.path_regex, r.methods, r.body_field.field_info.annotation)
                for r in api_routes(self.api.routes)
                if r.body_field is not None
            ]
        for regex, methods, model in self.routes:
            if scope["method"] in methods and regex.match(scope["path"]):
                return model if isinstance(model, type) and issubclass(model, BaseModel) else None
        return None

    async def __call__(self, scope, receive, send):
        model = self.model_of(scope) if scope["type"] == "http" else None
        if model is None:
            return await self.app(scope, receive, send)
        messages: list[dict] = []
        chunks: list[bytes] = []
        while not messages or messages[-1].get("more_body"):
            messages.append(await receive())
            if messages[-1]["type"] != "http.request":  # the client left
                break
            chunks.append(messages[-1].get("body", b""))
        body = b"".join(chunks)
        try:
            many = len(list(islice(KEY_END.finditer(body), FEW_KEYS + 1))) > FEW_KEYS
            data = json.loads(body) if many and _is_json(scope) else None
        except (ValueError, RecursionError):  # the app answers a body that is not JSON
            data = None
        found: list[tuple] = []
        count = unknown_keys(model, data, ("body",), found)
        if count:
            items = [
                {
                    "loc": list(loc),
                    "msg": "Extra inputs are not permitted",
                    "type": "extra_forbidden",
                }
                for loc in found
            ]
            response = error_response(422, items, more=count - len(items))
            return await response(scope, receive, send)

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _is_json(scope) -> bool:
    """Whether the request says its body is JSON, as FastAPI decides to parse it."""
    kind = dict(scope.get("headers", ())).get(b"content-type", b"").split(b";")[0].strip()
    return kind == b"application/json" or (
        kind.startswith(b"application/") and kind.endswith(b"+json")
    )


def unknown_keys(model: type[BaseModel], data, loc: tuple, found: list) -> int:
    """How many keys of the JSON ``data`` ``model`` forbids, counting those of the models its
    fields hold; the paths of the first MAX_ITEMS go into ``found``."""
    if not isinstance(data, dict):
        return 0
    keys = {f.alias or name: f for name, f in model.model_fields.items()}
    count = 0
    if model.model_config.get("extra") == "forbid" and (count := len(data.keys() - keys)):
        for key in data:
            if len(found) >= MAX_ITEMS:
                break
            if key not in keys:
                found.append((*loc, key))
    for key, field in keys.items():
        if key in data:
            for inner in _models_in(field.annotation):
                count += unknown_keys(inner, data[key], (*loc, key), found)
    return count


def _models_in(annotation):
    """The pydantic models an annotation holds directly (``Edit``, ``Edit | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    elif typing.get_origin(annotation) is not list:
        for arg in typing.get_args(annotation):
            yield from _models_in(arg)


def api_routes(routes) -> list[APIRoute]:
    """Every endpoint, looking inside included routers (FastAPI ≥ 0.16x keeps them nested)."""
    found = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif hasattr(route, "original_router"):
            found += api_routes(route.original_router.routes)
    return found
