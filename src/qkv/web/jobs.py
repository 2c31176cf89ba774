"""A long text through a real model, as a job the page polls: tracing 2,000–8,000 tokens takes
seconds to minutes, so the request starts it and answers at once.

    POST /api/model/jobs        {model, text} -> 202 {job, run, state, phase, done, total, …};
                                one job runs at a time; MAX_PENDING jobs may be running or
                                waiting, one more is a 429 naming the limit
    GET  /api/model/jobs/{job}  the same, as it moves: phase "forward" (``done`` of ``total``
                                layers run); ``ready`` once the run can be read; state "done"
                                or "failed" (the grid's thumbnails: ``thumbs.py``, on request)

The text is checked in the request (a 422 naming the field): at most ``ModelPool.max_chars``
characters before tokenizing, at most the model's context after. ``run`` names the trace for
the zoom views (``zoomapi.py``); the pool keeps the last few runs (``models.KEEP_RUNS``,
``KEEP_BYTES``), and a run it dropped is a 404 that says to trace the text again.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, create_model

from qkv.views import zoom
from qkv.web.errors import FieldError, shown
from qkv.web.models import CHARS_PER_TOKEN, TEXT_CHARS, ModelPool

KEEP_JOBS = 32  # job records kept (the oldest finished ones are dropped first)
MAX_PENDING = 2  # jobs running or waiting their turn (one runs at a time); more are a 429


class JobRequest(BaseModel):
    """A text to trace through a model (the router narrows ``model`` to the pool's names)."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(description="GET /api/models lists them")
    text: str = Field(
        min_length=1,
        max_length=TEXT_CHARS,
        description="up to the model's context (GET /api/models: max_tokens, max_chars)",
    )


@dataclass
class Job:
    id: str
    model: str
    text: str
    run: str  # the run's name: a hash of model and text
    tokens: int
    state: str = "running"  # running, done, failed
    phase: str = "queued"  # queued, forward, done
    done: int = 0
    total: int = 0
    ready: bool = False  # the trace can be read (the forward pass is over)
    message: str = ""
    thumbnails: zoom.Payload | None = field(default=None, repr=False)

    def status(self) -> dict:
        return {
            "job": self.id,
            "run": self.run,
            "model": self.model,
            "tokens": self.tokens,
            "state": self.state,
            "phase": self.phase,
            "done": self.done,
            "total": self.total,
            "ready": self.ready,
            "message": self.message,
        }


def run_name(*parts: str) -> str:
    """A run's name: 16 hex digits of a hash of what makes it (a model and a text)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


class Jobs:
    """The trace jobs of one app, over its model pool."""

    def __init__(self, pool: ModelPool):
        self.pool = pool
        self.jobs: OrderedDict[str, Job] = OrderedDict()
        self.by_run: dict[str, Job] = {}  # run name -> its latest job
        self.served: dict = {}  # run name -> a saved run served for good (``served.py``)
        self.lock = threading.Lock()
        self.turn = threading.Lock()  # one trace at a time: each takes every core it can

    def start(self, model: str, text: str) -> Job:
        """Check ``text`` for ``model`` and start tracing it (or give the job that did)."""
        if not text.strip():
            raise FieldError(
                "text", f"text must contain at least one non-space character, got {shown(text)}"
            )
        m = self.pool.get(model)
        limit = self.pool.max_chars(model)
        if len(text) > limit:
            raise FieldError(
                "text",
                f"text is {len(text):,} characters; {model} reads at most {limit:,} before "
                f"tokenizing ({_context(m)}): shorten the text",
            )
        try:
            ids, _ = m.encode(text)
        except ValueError as e:
            raise FieldError("text", str(e)) from None
        name = run_name(model, text)
        with self.lock:
            old = self.by_run.get(name)
            if old and old.state != "failed" and (not old.ready or self.kept(old)):
                return old
            pending = sum(j.state == "running" for j in self.jobs.values())
            if pending >= MAX_PENDING:
                raise FieldError(
                    "text",
                    f"the server traces at most {MAX_PENDING} texts at a time (one runs, the "
                    f"others wait their turn) and has {pending}: try again when one is done",
                    429,
                )
            job = Job(uuid.uuid4().hex[:12], model, text, name, len(ids))
            self.jobs[job.id] = job
            self.by_run[name] = job
            self._trim()
        threading.Thread(target=self._work, args=(job, m), daemon=True).start()
        return job

    def _work(self, job: Job, m) -> None:
        def step(phase):
            def report(done: int, total: int) -> None:
                job.phase, job.done, job.total = phase, done, total

            return report

        try:
            with self.turn:
                self._trace(job, m, step)
        except FieldError as e:
            job.state, job.message = "failed", e.message
        except Exception as e:  # noqa: BLE001 - the job reports it; the status is the answer
            job.state, job.message = "failed", f"{type(e).__name__}: {e}"

    def _trace(self, job: Job, m, step) -> None:
        job.phase, job.total = "forward", m.n_layers
        self.pool.run(m, job.text, progress=step("forward"))
        with self.lock:  # a status shows both or neither
            job.ready = True  # the grid's thumbnails are pooled when asked for (thumbs.py)
            job.phase, job.state = "done", "done"

    def get(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise FieldError("job", f"no job {shown(job_id)} here (it may have been dropped)", 404)
        return job

    def kept(self, job: Job):
        """The run of a job, if the pool still keeps it (else None)."""
        return self.served.get(job.run) or self.pool.runs.get((job.model, job.text))

    def run_of(self, name: str):
        """(the job, the run) of a run name; 404 when unknown or dropped, 409 while tracing."""
        job = self.by_run.get(name)
        if job is None:
            raise FieldError("run", f"no run {shown(name)} here: trace the text first", 404)
        if not job.ready and job.state == "failed":
            raise FieldError("run", f"tracing this text failed: {job.message}", 409)
        if not job.ready:
            raise FieldError(
                "run", f"this text is still being traced ({job.done} of {job.total} layers)", 409
            )
        run = self.kept(job)
        if run is None:
            raise FieldError(
                "run",
                "this run is no longer kept (the server keeps the last few texts): trace the "
                "text again",
                404,
            )
        return job, run

    def _trim(self) -> None:
        while len(self.jobs) > KEEP_JOBS:
            old = next(
                (
                    j
                    for j in self.jobs.values()
                    if j.state != "running" and j.run not in self.served
                ),
                None,
            )
            if old is None:
                return
            del self.jobs[old.id]
            if self.by_run.get(old.run) is old:
                del self.by_run[old.run]


def _context(m) -> str:
    n = getattr(m, "max_tokens", None)
    return (
        f"{CHARS_PER_TOKEN} a token of its {n:,}-token context" if n else "its context is unknown"
    )


def router(jobs: Jobs) -> APIRouter:
    """The job endpoints over ``jobs``; a request names one of its pool's models (else 422)."""
    routes = APIRouter()
    names: Any = Literal[tuple(jobs.pool.names)]
    Request = create_model(
        "JobRequest",
        __base__=JobRequest,
        model=(names, Field(description="GET /api/models lists them")),
    )

    def start(req):
        """Start tracing a text (up to the model's context); poll GET /api/model/jobs/{job}."""
        job = jobs.start(req.model, req.text)
        return JSONResponse(job.status(), status_code=202)

    start.__annotations__["req"] = Request  # a class made here, not a name to look up
    routes.post(
        "/api/model/jobs",
        status_code=202,
        responses={
            422: {
                "description": "the model is not listed or not installed, or the "
                "text is empty, too long in characters or past the model's context"
            },
            429: {"description": f"{MAX_PENDING} texts are being traced or waiting already"},
        },
    )(start)

    @routes.get("/api/model/jobs/{job}", responses={404: {"description": "no such job here"}})
    def status(job: str):
        """How far a trace job is: phase, layers done of total, ready, state, message."""
        with jobs.lock:
            return jobs.get(job).status()

    return routes
