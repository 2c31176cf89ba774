"""The zoom views over real HTTP: a text traced by a job (progress polled), one head's overview,
window and row as binary answers checked against float64 softmax of the trace's q and k, the
bytes a 2,048-token SmolLM2 text costs the page, and bad requests as 4xx naming the field."""

from __future__ import annotations

import time

import numpy as np
import pytest
from zoom_reference import pool_thumbnails, reference_weights

httpx = pytest.importorskip("httpx", reason="httpx is not installed (dev extra)")

from qkv import models  # noqa: E402
from qkv.bench.trace import WORDS, text_of  # noqa: E402
from qkv.views.zoom import unpack  # noqa: E402

FIRST_STATE = 2 << 20  # bytes: the page's first state at 2,048 tokens
CHANGE = 256 << 10  # bytes: each change (τ, layer, head, query, zoom)


@pytest.fixture(scope="module")
def client(model_server_url):
    with httpx.Client(base_url=model_server_url, timeout=300) as c:
        yield c


def traced(client, model: str, text: str, *, sizes: list | None = None) -> dict:
    """Start a trace job and poll it until it is done; ``sizes`` collects the answers' bytes."""
    r = client.post("/api/model/jobs", json={"model": model, "text": text})
    assert r.status_code == 202, r.text
    seen = [r.json()]
    while seen[-1]["state"] == "running":
        time.sleep(0.2)
        r = client.get(f"/api/model/jobs/{seen[-1]['job']}")
        seen.append(r.json())
    if sizes is not None:
        sizes += [len(r.content)]  # the page polls, too; its last answer is the one it reads
    assert seen[-1]["state"] == "done", seen[-1]
    order = {"queued": 0, "forward": 1, "done": 2}
    steps = [(order[s["phase"]], s["done"]) for s in seen]
    assert steps == sorted(steps), steps  # layers run, never backwards
    return seen[-1]


def view(client, path: str, sizes: list | None = None, **body):
    r = client.post(f"/api/model/{path}", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/octet-stream"
    if sizes is not None:
        sizes.append(len(r.content))
    return unpack(r.content)


@pytest.fixture(scope="module")
def minilm_run(client, minilm):
    text = " ".join(WORDS[i % len(WORDS)] for i in range(148))  # one token a word
    job = traced(client, "minilm-l6", text)  # and [CLS], [SEP]
    assert job["tokens"] == 150 and job["total"] == 6
    return job, minilm.trace(text)


def test_a_window_and_a_row_hold_the_heads_weights(client, minilm_run):
    job, run = minilm_run
    layer = run.layer(4)
    want = reference_weights(layer, 7, slice(0, 150))  # float64, from q and k
    got = view(client, "window", run=job["run"], layer=4, head=7, r0=40, r1=61, c0=3, c1=150)
    assert got.header["exact"] and got.data.shape == (21, 147)
    np.testing.assert_allclose(got.data, want[40:61, 3:150], rtol=1e-5, atol=1e-7)
    assert run.tokens[40] == WORDS[39 % len(WORDS)] == "red"
    assert got.header["rows"][0] == "red@40"  # a repeated token, named by its position
    row = view(client, "row", run=job["run"], layer=4, head=7, q=99, k=5)
    np.testing.assert_allclose(row.data, want[99], rtol=1e-5, atol=1e-7)
    assert [t["index"] for t in row.header["top"]] == np.argsort(-want[99])[:5].tolist()
    hot = view(client, "window", run=job["run"], layer=4, head=7, tau=2.5, r0=0, r1=9, c0=0, c1=9)
    want_hot = reference_weights(layer, 7, slice(0, 9), tau=2.5)
    np.testing.assert_allclose(hot.data, want_hot[:, :9], rtol=1e-5, atol=1e-7)


def test_the_overview_is_max_pooled_and_the_thumbnails_too(client, minilm_run):
    job, run = minilm_run
    want = reference_weights(run.layer(1), 2, slice(0, 150))
    got = view(client, "overview", run=job["run"], layer=1, head=2, size=50)
    assert got.header["factor"] == [3, 3] and "max-pooled" in got.header["legend"]
    pooled = want.reshape(50, 3, 50, 3).max(axis=(1, 3))
    assert np.abs(got.data - np.rint(255 * np.sqrt(pooled))).max() <= 1
    pool_thumbnails(client, job["run"])
    r = client.get("/api/model/thumbnails", params={"run": job["run"]})
    thumbs = unpack(r.content)
    assert thumbs.data.shape == (6, 12, 50, 50)  # 150 tokens pooled by 3 to at most 64
    assert np.abs(thumbs.data[1, 2] - np.rint(255 * np.sqrt(pooled))).max() <= 1


def test_a_token_search_names_positions(client, minilm_run):
    job, run = minilm_run
    r = client.post("/api/model/search", json={"run": job["run"], "text": "box"})
    want = [j for j, t in enumerate(run.tokens) if t == "box"]
    assert r.status_code == 200 and [h["index"] for h in r.json()["hits"]] == want
    assert r.json()["count"] == len(want) > 1


def test_the_models_context_is_said_before_loading(minilm, smollm2):
    assert models.CONTEXT == {"minilm-l6": minilm.max_tokens, "smollm2-135m": smollm2.max_tokens}


@pytest.mark.parametrize(
    "path, body, status, words",
    [
        (
            "window",
            {"r0": 5, "r1": 5, "c0": 0, "c1": 3},
            422,
            "r1: r1 must be an integer in [6, 150]",
        ),
        (
            "window",
            {"r0": 0, "r1": 151, "c0": 0, "c1": 3},
            422,
            "r1 must be an integer in [1, 150]",
        ),
        ("window", {"r0": 0, "r1": 2, "c0": 0}, 422, "c1: Field required"),
        (
            "window",
            {"r0": 0, "r1": 2, "c0": 0, "c1": 2, "layer": 6},
            422,
            "[0, 6) (minilm-l6 has 6 layers)",
        ),
        (
            "window",
            {"r0": 0, "r1": 2, "c0": 0, "c1": 2, "head": 12},
            422,
            "head must be in [0, 12)",
        ),
        (
            "window",
            {"r0": 0, "r1": 2, "c0": 0, "c1": 2, "tau": 0},
            422,
            "tau: Input should be greater",
        ),
        (
            "window",
            {"r0": 0, "r1": 2, "c0": 0, "c1": 2, "step": "out"},
            422,
            "step: step must be one of",
        ),
        ("window", {"r0": 0, "r1": 2, "c0": 0, "c1": 2, "colour": 1}, 422, "colour"),
        ("row", {"q": 150}, 422, "q: q must be an integer in [0, 149]"),
        ("row", {"q": 1, "k": 65}, 422, "k: Input should be less than or equal to 64"),
        ("overview", {"size": 0}, 422, "size: Input should be greater than or equal to 1"),
        ("overview", {"run": "0" * 16}, 404, "no run '0000000000000000' here"),
        ("overview", {"run": "xyz"}, 422, "run: String should match pattern"),
    ],
)
def test_bad_views_are_4xx_naming_the_field(client, minilm_run, path, body, status, words):
    r = client.post(f"/api/model/{path}", json={"run": minilm_run[0]["run"], **body})
    assert r.status_code == status, r.text
    assert words in r.json()["message"]


@pytest.mark.parametrize(
    "body, words",
    [
        (
            {"model": "minilm-l6", "text": "word " * 600},
            "602 tokens long; minilm-l6's context is 512",
        ),
        (
            {"model": "minilm-l6", "text": "x" * 4097},
            "4,097 characters; minilm-l6 reads at most 4,096",
        ),
        ({"model": "smollm2-135m", "text": "x" * 65_537}, "at most 65536 characters"),
        ({"model": "minilm-l6", "text": " \n "}, "non-space"),
        ({"model": "gpt-9", "text": "hi"}, "'minilm-l6' or 'smollm2-135m'"),
    ],
)
def test_bad_texts_are_422_naming_the_limit(client, body, words):
    r = client.post("/api/model/jobs", json=body)
    assert r.status_code == 422 and words in r.json()["message"], r.text


def test_unknown_jobs_and_thumbnails_are_404(client):
    assert client.get("/api/model/jobs/nope").status_code == 404
    r = client.get("/api/model/thumbnails", params={"run": "f" * 16})
    assert r.status_code == 404 and "trace the text first" in r.json()["message"]
    r = client.post("/api/model/thumbnails", json={"run": "f" * 16})
    assert r.status_code == 404 and "trace the text first" in r.json()["message"]
    r = client.post("/api/model/thumbnails", json={"run": "F" * 16})
    assert r.status_code == 422 and "run: String should match pattern" in r.json()["message"]


def test_a_jobs_thumbnails_are_pooled_only_when_asked_for(client, minilm):
    text = " ".join(WORDS[i % len(WORDS)] for i in range(1, 121))  # 122 tokens: a long text
    job = traced(client, "minilm-l6", text)
    assert job["state"] == "done" and job["phase"] == "done"
    r = client.get("/api/model/thumbnails", params={"run": job["run"]})
    assert r.status_code == 409, r.text  # done, and nothing pooled: no pooling was ever started
    assert "not ready (POST /api/model/thumbnails {run} pools them)" in r.json()["message"]
    answers = pool_thumbnails(client, job["run"])
    assert answers[0]["total"] == 6 and answers[-1]["done"] == 6
    assert [a["done"] for a in answers] == sorted(a["done"] for a in answers)
    thumbs = unpack(client.get("/api/model/thumbnails", params={"run": job["run"]}).content)
    assert thumbs.data.shape == (6, 12, 61, 61)  # 122 tokens pooled by 2
    layer = minilm.trace(text).layer(3)
    want = reference_weights(layer, 11, slice(0, 122)).reshape(61, 2, 61, 2).max(axis=(1, 3))
    assert np.abs(thumbs.data[3, 11] - np.rint(255 * np.sqrt(want))).max() <= 1
    again = client.post("/api/model/thumbnails", json={"run": job["run"]})
    assert again.status_code == 200 and again.json()["state"] == "done"  # pooled once


@pytest.mark.slow
def test_a_2048_token_text_costs_the_page_little(client, smollm2):
    """The page's first state at 2,048 tokens, and each change, in bytes over HTTP."""
    # not the browser test's text: each test sees its own trace job from the start
    text = "A" + text_of(smollm2, 2048).removeprefix("The")
    first: list[int] = []
    job = traced(client, "smollm2-135m", text, sizes=first)
    assert job["tokens"] == 2048 and job["total"] == 30
    run, L = job["run"], 2048
    head = {"run": run, "layer": 0, "head": 0}  # the grid's thumbnails wait to be asked for
    view(client, "overview", first, **head)
    view(client, "row", first, **head, q=L - 1)
    assert sum(first) <= FIRST_STATE, first
    zoomed = {"r0": 1000, "r1": 1400, "c0": 900, "c1": 1300}  # 400 × 400: pooled by 4
    changes = {
        "tau": [
            ("overview", {**head, "tau": 0.5}),
            ("row", {**head, "tau": 0.5, "q": L - 1}),
            ("window", {**head, "tau": 0.5, **zoomed}),
        ],
        "layer": [
            ("overview", {**head, "layer": 17}),
            ("row", {**head, "layer": 17, "q": L - 1}),
            ("window", {**head, "layer": 17, **zoomed}),
        ],
        "head": [
            ("overview", {**head, "head": 8}),
            ("row", {**head, "head": 8, "q": L - 1}),
            ("window", {**head, "head": 8, **zoomed}),
        ],
        "query": [("row", {**head, "q": 1234})],
        "zoom": [("window", {**head, "r0": 1200, "r1": 1328, "c0": 1100, "c1": 1228})],
    }
    for name, asks in changes.items():
        sizes: list[int] = []
        for path, body in asks:
            got = view(client, path, sizes, **body)
        assert sum(sizes) <= CHANGE, (name, sizes)
    assert got.header["exact"] and got.data.shape == (128, 128)  # the zoom: every number
