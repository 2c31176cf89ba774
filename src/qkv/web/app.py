"""The simulator's FastAPI app: a JSON API over the engine plus the page's own static files.

    GET  /                      the page (static/index.html)
    GET  /static/...            its script and style sheet, from static/ only
    GET  /api/limits            the bounds and names the page shares with the API
    GET  /api/presets...        the built-in scenes, POST /api/trace a trace (scenes.py)
    GET  /api/practice...       exercises for the practice panel (practice.py)
    GET  /api/models            the real models, POST /api/model/trace one sentence (models.py)
    GET  /api/openapi.json      the schema (interactive docs are off: they would need a CDN)

Every error is a 4xx JSON body {"message": "field: what was expected, what came", "detail": [...]}
(errors.py).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from qkv.trace import STEPS
from qkv.web import errors, models, practice, scenes, schemas

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


def limits() -> dict:
    """The bounds the API enforces and the step names, so the page never copies them by hand."""
    return {"steps": list(STEPS), "max_abs": schemas.MAX_ABS,
            "max_scene_tokens": schemas.MAX_SCENE_TOKENS, "max_dims": schemas.MAX_DIMS,
            "max_heads": schemas.MAX_HEADS, "max_token_chars": schemas.MAX_TOKEN_CHARS,
            "tau_min": schemas.TAU_MIN, "tau_max": schemas.TAU_MAX,
            "model_page_tokens": models.MODEL_PAGE_TOKENS, "model_max_chars": models.MAX_CHARS,
            "max_answer_chars": practice.MAX_ANSWER_CHARS}


def create_app(*, model_pool=None) -> FastAPI:
    """A fresh app (no global state); ``qkv serve`` runs one under uvicorn.

    model_pool: a ``models.ModelPool`` (default: a new one that loads models on first use).
    """
    app = FastAPI(title="qkv simulator", version="1", docs_url=None, redoc_url=None,
                  openapi_url="/api/openapi.json",
                  description="Query-key-value attention with every number from qkv's engine.")

    errors.install(app)
    app.add_middleware(SecurityHeaders)

    @app.get("/api/limits")
    def get_limits() -> dict:
        """Bounds on every field and the trace's step names, in the order the engine runs them."""
        return limits()

    app.include_router(scenes.router)
    app.include_router(practice.router)
    app.include_router(models.router(model_pool or models.ModelPool()))

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
