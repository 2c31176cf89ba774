"""The zoom views of a traced text, computed on demand from its lazy trace (``views.zoom``) and
sent as binary: application/octet-stream, ``views.zoom.Payload.to_bytes`` (a JSON header, then
one array), which the page's ``static/zoomdata.js`` reads.

    POST /api/model/overview    {run, layer, head, tau, step, size} -> one head max-pooled
    POST /api/model/window      {…, r0, r1, c0, c1} -> those queries × keys, float32
    POST /api/model/row         {…, q, width, k} -> query q's weights over every key, top keys
    POST /api/model/search      {run, text} -> JSON: the positions whose token matches

(The grid's thumbnails, pooled on request: ``thumbs.py``.) ``run`` is the name a trace job
gave (``jobs.py``) or a saved run the server was started with (``served.py``). A bad field is a 422 naming it, a run the
server does not keep a 404, a run still being traced a 409 — never a 500.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from qkv.views import zoom
from qkv.web.errors import FieldError
from qkv.web.jobs import Jobs
from qkv.web.models import in_range
from qkv.web.schemas import TAU_MAX, TAU_MIN

RUN = Field(pattern="^[0-9a-f]{16}$", description="the run a trace job named")
KEEP_TEMPERED = 4  # layers kept at a τ other than the model's (each has its own tile cache)
BINARY: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {}}, "description": "views.zoom payload"},
    404: {"description": "no such run here (or no longer kept): trace the text again"},
    409: {"description": "the text is still being traced"},
    422: {"description": "a field is missing, malformed or out of range"},
}


class HeadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run: str = RUN
    layer: int = Field(0, strict=True, ge=0)
    head: int = Field(0, strict=True, ge=0, description="query head")
    tau: float = Field(1.0, ge=TAU_MIN, le=TAU_MAX, allow_inf_nan=False, description="τ")
    step: str = Field("weights", description=f"one of {', '.join(zoom.SCORE_STEPS)}")


class OverviewRequest(HeadRequest):
    size: int = Field(zoom.OVERVIEW, strict=True, ge=1, le=zoom.MAX_OVERVIEW)


class WindowRequest(HeadRequest):
    r0: int = Field(strict=True, ge=0, description="first query")
    r1: int = Field(strict=True, ge=1, description="past the last query")
    c0: int = Field(strict=True, ge=0, description="first key")
    c1: int = Field(strict=True, ge=1, description="past the last key")


class RowRequest(HeadRequest):
    q: int = Field(strict=True, ge=0, description="the query")
    width: int = Field(zoom.ROW_WIDTH, strict=True, ge=1, le=zoom.MAX_ROW_WIDTH)
    k: int = Field(8, strict=True, ge=1, le=zoom.MAX_TOP, description="top keys named")


class SearchRequest(HeadRequest):
    """A token search of the run's text (layer, head, τ and step are taken, as every view
    request carries them, and do not change the answer)."""

    text: str = Field(min_length=1, max_length=200)


def binary(payload: zoom.Payload) -> Response:
    return Response(payload.to_bytes(), media_type="application/octet-stream")


def asked(call, fields: tuple[str, ...]):
    """``call()``, its ValueError or IndexError a 422 naming the field its message starts with."""
    try:
        return call()
    except (ValueError, IndexError) as e:
        first = str(e).split(" ", 1)[0]
        raise FieldError(first if first in fields else "body", str(e)) from None


def layer_of(model: str, run, layer: int, head: int):
    """Layer ``layer``'s trace of ``run``; a layer the run does not keep, or a head past its
    heads, is a 422 naming the field (a saved run may keep some layers only)."""
    kept = sorted(run.layers)
    if kept == list(range(len(kept))):
        in_range("layer", layer, len(kept), f"({model} has {len(kept)} layers)")
    elif layer not in run.layers:
        raise FieldError("layer", f"layer must be one of {kept} (the layers this run keeps), "
                         f"got {layer}")  # fmt: skip
    t = run.layer(layer)
    n = t.settings["n_heads"]
    in_range("head", head, n, f"({model} has {n} heads a layer)")
    return t


def router(jobs: Jobs) -> APIRouter:
    routes = APIRouter()
    tempered: OrderedDict = OrderedDict()  # (run, layer, τ) -> the layer's trace at τ

    def head_trace(req: HeadRequest):
        """(the layer's trace at τ, the run's tokens) for a request naming run, layer, head."""
        job, run = jobs.run_of(req.run)
        layer = layer_of(job.model, run, req.layer, req.head)
        if req.tau == float(layer.settings.get("temperature", 1.0)):
            return layer
        key = (req.run, req.layer, req.tau)
        with jobs.lock:
            if key in tempered:
                tempered.move_to_end(key)
                return tempered[key]
        found = asked(lambda: zoom.at_temperature(layer, req.tau), ("temperature",))
        with jobs.lock:
            tempered[key] = found
            while len(tempered) > KEEP_TEMPERED:
                tempered.popitem(last=False)
        return found

    @routes.post("/api/model/overview", response_class=Response, responses=BINARY)
    def overview(req: OverviewRequest):
        """One head's step max-pooled to at most size × size cells, one byte a cell."""
        t = head_trace(req)
        return binary(asked(lambda: zoom.overview(t, req.head, req.size, step=req.step), ("step",)))

    @routes.post("/api/model/window", response_class=Response, responses=BINARY)
    def window(req: WindowRequest):
        """Queries r0:r1 × keys c0:c1 as float32: exact up to 16,384 cells, else max-pooled."""
        t = head_trace(req)
        return binary(
            asked(
                lambda: zoom.window(t, req.head, req.r0, req.r1, req.c0, req.c1, step=req.step),
                ("r0", "r1", "c0", "c1", "step"),
            )
        )

    @routes.post("/api/model/row", response_class=Response, responses=BINARY)
    def row(req: RowRequest):
        """Query q's weights over every key (pooled to width) and its k heaviest keys."""
        t = head_trace(req)
        return binary(asked(lambda: zoom.row(t, req.head, req.q, req.width, req.k), ("q",)))

    @routes.post("/api/model/search")
    def search(req: SearchRequest):
        """The positions whose token matches the text (at most 200 named, all counted)."""
        _, run = jobs.run_of(req.run)
        return JSONResponse(asked(lambda: zoom.search(run.tokens, req.text), ("search",)))

    return routes
