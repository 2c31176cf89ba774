"""Saved runs the server was started with (``qkv serve --trace FILE``): each loaded once
(``qkv.load``, every layer a lazy trace), served as a trace job that is done already, and kept
while the server runs (never dropped like a traced text's run), so the zoom views (``zoomapi.py``)
read its tiles from the file's q, k, v and nothing is traced again.

    GET /api/model/runs   [{run, job, model, tokens, layers, n_heads, text}]: the page opens the
                          first in its model mode

``text`` is the run's token labels joined (a saved run keeps its tokens, not the text typed).
"""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from qkv.web.jobs import Job, Jobs, run_name


def saved_name(run) -> str:
    """A saved run's name: ``jobs.run_name`` of its model and token ids ("saved" first, which
    no model is called, so no traced text shares it)."""
    return run_name("saved", run.model, ",".join(str(int(i)) for i in run.ids))


def add(jobs: Jobs, run) -> Job:
    """Serve ``run`` (a ``ModelTrace``) from ``jobs``: a job that is done, its run kept."""
    if not run.layers:
        raise ValueError("a served run needs at least one layer; this one keeps none")
    name = saved_name(run)
    text = "".join(run.tokens)
    job = Job(uuid.uuid4().hex[:12], run.model, text, name, len(run.tokens), state="done",
              phase="done", done=len(run.layers), total=len(run.layers), ready=True)  # fmt: skip
    with jobs.lock:
        jobs.served[name] = run
        jobs.jobs[job.id] = job
        jobs.by_run[name] = job
    return job


def described(jobs: Jobs, name: str) -> dict:
    run, job = jobs.served[name], jobs.by_run[name]
    first = run.layers[min(run.layers)]
    return {
        **job.status(),
        "layers": sorted(run.layers),
        "n_heads": first.settings["n_heads"],
        "text": job.text,
    }


def router(jobs: Jobs) -> APIRouter:
    routes = APIRouter()

    @routes.get("/api/model/runs")
    def runs() -> list[dict]:
        """The saved runs this server was started with (qkv serve --trace FILE), first to last:
        each one's run name for the zoom views, its model, tokens, layers and heads."""
        return [described(jobs, name) for name in jobs.served]

    return routes
