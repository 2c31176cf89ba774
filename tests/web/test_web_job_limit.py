"""The trace jobs' limit over real HTTP: while the server traces, at most ``jobs.MAX_PENDING``
jobs run or wait their turn; one more is a 429 whose message names the limit, and once the
jobs are done a new text is taken again."""

from __future__ import annotations

import time

import pytest

httpx = pytest.importorskip("httpx", reason="httpx is not installed (dev extra)")

from qkv.web.app import create_app  # noqa: E402
from qkv.web.jobs import MAX_PENDING  # noqa: E402
from qkv.web.models import ModelPool  # noqa: E402


def test_one_job_past_the_limit_is_a_429_naming_it(minilm, serve):
    app = create_app(model_pool=ModelPool(loaded={"minilm-l6": minilm}))
    texts = [f"text number {i} about a cat" for i in range(MAX_PENDING + 2)]
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:

        def post(text: str):
            return client.post("/api/model/jobs", json={"model": "minilm-l6", "text": text})

        with app.state.jobs.turn:  # the server is busy tracing: every job started waits its turn
            started = [post(t) for t in texts[:MAX_PENDING]]
            assert [r.status_code for r in started] == [202] * MAX_PENDING
            assert all(r.json()["phase"] == "queued" for r in started)
            refused = post(texts[MAX_PENDING])
            assert refused.status_code == 429
            assert refused.json()["message"] == (
                f"text: the server traces at most {MAX_PENDING} texts at a time (one runs, the "
                f"others wait their turn) and has {MAX_PENDING}: try again when one is done"
            )
            again = post(texts[0])  # a text already being traced is its job, not one more
            assert again.status_code == 202 and again.json()["job"] == started[0].json()["job"]
        for r in started:  # the turn is free: the waiting jobs run
            job = r.json()
            while job["state"] == "running":
                time.sleep(0.05)
                job = client.get(f"/api/model/jobs/{job['job']}").json()
            assert job["state"] == "done" and job["tokens"] == 8  # [CLS] 6 words [SEP]
        assert post(texts[MAX_PENDING]).status_code == 202
