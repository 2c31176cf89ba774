"""The simulator's FastAPI app: a JSON API over the engine plus the page's own static files.

    GET  /                      the page (static/index.html)
    GET  /static/...            its script and style sheet, from static/ only
    GET  /api/presets           the built-in scenes
    GET  /api/presets/{name}    one scene with its numbers (x, W_Q, W_K, W_V[, W_O, b_O])
    POST /api/trace             a trace, the selected row's numbers and the walkthrough
    GET  /api/practice...       exercises for the practice panel (see practice_api)
    GET  /api/models            the real models (model_api.py)
    POST /api/model/trace       a sentence through a real model: the grid and one head
    GET  /api/openapi.json      the schema (interactive docs are off: they would need a CDN)

Every error is a 4xx JSON body {"message": "field: what was expected, what came", "detail": [...]}.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from qkv import presets
from qkv.web import compute
from qkv.web.practice_api import router as practice_router
from qkv.web.schemas import SceneData, SceneInfo, TraceRequest, TraceResponse

STATIC = Path(__file__).parent / "static"

# The page loads nothing from anywhere but this server.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "style-src 'self'; script-src 'self'; connect-src 'self'; "
                               "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class SecurityHeaders:
    """ASGI middleware adding SECURITY_HEADERS to every HTTP response."""

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


def _error(status: int, items: list[dict]) -> JSONResponse:
    message = "; ".join(f"{_where(e['loc'])}: {e['msg']}" if e.get("loc") else e["msg"]
                        for e in items)
    return JSONResponse({"message": message, "detail": items}, status_code=status)


def _where(loc) -> str:
    parts = [str(p) for p in loc if p not in ("body", "path", "query")]
    return ".".join(parts) or "body"


def create_app(*, model_pool=None) -> FastAPI:
    """A fresh app (no global state); ``qkv serve`` runs one under uvicorn.

    model_pool: a ``model_api.ModelPool`` (default: a new one that loads models on first use).
    """
    app = FastAPI(title="qkv simulator", version="1", docs_url=None, redoc_url=None,
                  openapi_url="/api/openapi.json",
                  description="Query-key-value attention with every number from qkv's engine.")

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        items = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""),
                  "type": e.get("type", "")} for e in exc.errors()]
        return _error(422, items)

    @app.exception_handler(compute.FieldError)
    async def field_error(request: Request, exc: compute.FieldError):
        return _error(exc.status, [{"loc": ["body", exc.field], "msg": exc.message,
                                    "type": "value_error"}])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return _error(exc.status_code, [{"loc": [], "msg": str(exc.detail), "type": "http"}])

    app.add_middleware(SecurityHeaders)

    @app.get("/api/presets", response_model=list[SceneInfo])
    async def list_presets():
        """The built-in scenes, the default first."""
        return [compute.scene_info(presets.load(n)) for n in presets.names()]

    @app.get("/api/presets/{name}", response_model=SceneData,
             responses={404: {"description": "unknown preset"}})
    async def get_preset(name: str):
        """One scene with its numbers, weights with a head axis (single-head: 1 head)."""
        return compute.scene_data(compute.load_preset(name, field="name"))

    @app.post("/api/trace", response_model=TraceResponse,
              responses={422: {"description": "a field is missing, malformed or inconsistent"}})
    async def trace(req: TraceRequest):
        """Run the scene through the engine: trace, the selected row's numbers, walkthrough."""
        # Answered as built: the shape is TraceResponse's by construction (tests check it
        # against the schema), and re-validating every array would double the request's time.
        return JSONResponse(compute.run(req))

    app.include_router(practice_router)
    from qkv.web import model_api

    model_api.add_routes(app, model_pool or model_api.ModelPool())

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
