"""ASGI middleware around the whole simulator app, one concern each:

SecurityHeaders   the page loads nothing from anywhere but this server
HeadAsGet         HEAD is answered like GET (same status and headers, no body)
BodyLimit         a request body past ``max_bytes`` is a 413 in the API's JSON error shape,
                  whether its Content-Length says so or its streamed chunks add up to it
"""

from __future__ import annotations

from starlette.exceptions import HTTPException

from qkv.web.errors import error_response

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
