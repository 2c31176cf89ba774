"""The grid's thumbnails of a run, pooled when asked for: every head of every layer max-pooled
to at most 64 × 64 (``views.zoom.thumbnails``) reads each head's weights once, which at 2,048
tokens on SmolLM2 takes most of a minute; a trace job does not pay for it unless someone opens
the grid.

    POST /api/model/thumbnails  {run} -> 202 {run, state: "pooling", done, total, message}
                                while the layers are pooled (the first request starts it; ask
                                again to follow it), 200 {…, state: "done"} once they are
    GET  /api/model/thumbnails?run=…  the pooled thumbnails, binary (``zoom.Payload``); a 409
                                until they are pooled

One pooling at a time per run; it waits for the trace job running, if any (``Jobs.turn``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from qkv.views import zoom
from qkv.web.errors import FieldError
from qkv.web.jobs import Job, Jobs
from qkv.web.zoomapi import BINARY, RUN, binary


@dataclass
class Pooling:
    """How far the thumbnails of one job's run are pooled."""

    run: str
    total: int
    state: str = "pooling"  # pooling, done, failed
    done: int = 0
    message: str = ""

    def status(self) -> dict:
        return {"run": self.run, "state": self.state, "done": self.done, "total": self.total,
                "message": self.message}  # fmt: skip


class ThumbnailRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run: str = RUN


class Thumbnails:
    """The thumbnails of ``jobs``' runs, pooled on request."""

    def __init__(self, jobs: Jobs):
        self.jobs = jobs
        self.pooling: dict[str, Pooling] = {}  # job id -> its pooling while it runs or failed

    def start(self, name: str) -> Pooling:
        """Start pooling run ``name``'s thumbnails, or say how far they are."""
        job, run = self.jobs.run_of(name)
        n = len(run.layers)
        with self.jobs.lock:
            if job.thumbnails is not None:
                return Pooling(name, n, "done", n)
            found = self.pooling.get(job.id)
            if found is not None and found.state == "pooling":
                return found
            pooling = self.pooling[job.id] = Pooling(name, n)
        threading.Thread(target=self._work, args=(job, run, pooling), daemon=True).start()
        return pooling

    def _work(self, job: Job, run, pooling: Pooling) -> None:
        def report(done: int, total: int) -> None:
            pooling.done, pooling.total = done, total

        try:
            with self.jobs.turn:  # a trace job takes every core: pool after it
                if job.thumbnails is None:
                    layers = {i: run.layers[i] for i in sorted(run.layers)}
                    job.thumbnails = zoom.thumbnails(layers, progress=report)
            pooling.state = "done"
            with self.jobs.lock:
                self.pooling.pop(job.id, None)
        except Exception as e:  # noqa: BLE001 - the status is the answer
            pooling.state, pooling.message = "failed", f"{type(e).__name__}: {e}"

    def get(self, name: str) -> zoom.Payload:
        job, _ = self.jobs.run_of(name)
        if job.thumbnails is None:
            found = self.pooling.get(job.id)
            why = (
                "POST /api/model/thumbnails {run} pools them"
                if found is None
                else found.message or f"{found.done} of {found.total} layers pooled"
            )
            raise FieldError("run", f"the thumbnails are not ready ({why})", 409)
        return job.thumbnails


def router(thumbs: Thumbnails) -> APIRouter:
    routes = APIRouter()

    @routes.post(
        "/api/model/thumbnails",
        status_code=202,
        responses={200: {"description": "pooled already"}, **BINARY},
    )
    def pool(req: ThumbnailRequest):
        """Pool every layer's and head's weights for the grid (once a run); poll with the same
        request until state is "done", then GET the thumbnails."""
        found = thumbs.start(req.run)
        return JSONResponse(found.status(), status_code=200 if found.state == "done" else 202)

    @routes.get("/api/model/thumbnails", response_class=Response, responses=BINARY)
    def thumbnails(run: str = Query(pattern="^[0-9a-f]{16}$")):  # noqa: B008
        """Every layer's and head's weights max-pooled to at most 64 × 64, one byte a cell
        (weight ≈ (byte/255)²), once POST /api/model/thumbnails has pooled them."""
        return binary(thumbs.get(run))

    return routes
