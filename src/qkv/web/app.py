"""The simulator's FastAPI app: a JSON API over the engine plus the page's own static files.

    GET  /                      the page (static/index.html)
    GET  /static/...            its script and style sheet, from static/ only
    GET  /api/limits            the bounds and names the page shares with the API
    GET  /api/presets...        the built-in scenes, POST /api/trace a trace (scenes.py)
    GET  /api/practice...       exercises for the practice panel (practice.py)
    GET  /api/models            the real models, POST /api/model/trace one sentence (models.py)
    POST /api/model/jobs        trace a text up to the model's context, polled (jobs.py); its
                                heads' zoom views, binary (zoomapi.py); the grid's thumbnails,
                                pooled on request (thumbs.py)
    GET  /api/model/runs        saved runs the server was started with (served.py)
    POST /api/model/patch       one head edited, the next token before/after; GET
                                /api/model/taxonomy, /api/model/abilities (whatif.py)
    POST /api/model/attribute   which heads wrote the next token (why.py)
    GET  /api/openapi.json      the schema (interactive docs are off: they would need a CDN)

Every error is a 4xx JSON body {"message": "field: what was expected, what came", "detail": [...]}
(errors.py), naming at most a few problems; a body past schemas.MAX_BODY_BYTES is a 413 in that
shape, unknown keys are refused before validation, HEAD is answered on every GET route
(guards.py). Endpoints are sync ``def``: the engine and the models run in the server's
thread pool, never on the event loop, so one slow request does not stall the others.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from qkv.trace import STEPS
from qkv.web import (
    errors,
    jobs,
    models,
    practice,
    scenes,
    schemas,
    served,
    thumbs,
    whatif,
    why,
    zoomapi,
)
from qkv.web.guards import BodyLimit, HeadAsGet, KnownKeys, SecurityHeaders

STATIC = Path(__file__).parent / "static"


def limits() -> dict:
    """The bounds the API enforces and the step names, so the page never copies them by hand."""
    return {
        "steps": list(STEPS),
        "max_abs": schemas.MAX_ABS,
        "max_scene_tokens": schemas.MAX_SCENE_TOKENS,
        "max_dims": schemas.MAX_DIMS,
        "max_heads": schemas.MAX_HEADS,
        "max_token_chars": schemas.MAX_TOKEN_CHARS,
        "tau_min": schemas.TAU_MIN,
        "tau_max": schemas.TAU_MAX,
        "model_page_tokens": models.PANEL_TOKENS,
        "model_max_chars": models.MAX_CHARS,
        "model_text_chars": models.TEXT_CHARS,
        "max_answer_chars": practice.MAX_ANSWER_CHARS,
        "max_body_bytes": schemas.MAX_BODY_BYTES,
    }


def create_app(*, model_pool=None, runs=()) -> FastAPI:
    """A fresh app (no global state); ``qkv serve`` runs one under uvicorn.

    model_pool: a ``models.ModelPool`` (default: a new one that loads models on first use).
    runs: saved runs (``qkv.load``) to serve as traced already (``served.py``).
    """
    app = FastAPI(
        title="qkv simulator",
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
        description="Query-key-value attention with every number from qkv's engine.",
    )

    errors.install(app)
    app.add_middleware(KnownKeys, api=app)
    app.add_middleware(BodyLimit, max_bytes=schemas.MAX_BODY_BYTES)
    app.add_middleware(HeadAsGet)
    app.add_middleware(SecurityHeaders)  # added last: outermost, so every answer carries them

    @app.get("/api/limits")
    def get_limits() -> dict:
        """Bounds on every field and the trace's step names, in the order the engine runs them."""
        return limits()

    app.include_router(scenes.router)
    app.include_router(practice.router)
    pool = model_pool or models.ModelPool()
    app.include_router(models.router(pool))
    extras = whatif.Extras(pool)  # each model's LM head, built once for both routers
    app.include_router(whatif.router(pool, extras))
    app.include_router(why.router(extras))
    traces = app.state.jobs = jobs.Jobs(pool)  # the trace jobs, seen by the tests too
    app.include_router(jobs.router(traces))
    app.include_router(zoomapi.router(traces))
    app.include_router(thumbs.router(thumbs.Thumbnails(traces)))
    for run in runs:
        served.add(traces, run)
    app.include_router(served.router(traces))

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
