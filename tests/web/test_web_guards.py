"""What every route of the simulator promises, over real HTTP: bodies past the limit are a 413 in
the JSON error shape, errors quote at most ~200 characters of the input, HEAD is answered where
GET is, endpoints run off the event loop, and a model is loaded once however many first
requests arrive together."""

from __future__ import annotations

import inspect
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

httpx = pytest.importorskip("httpx", reason="httpx is not installed (dev extra)")


from qkv.web import schemas  # noqa: E402
from qkv.web.app import create_app  # noqa: E402
from qkv.web.guards import api_routes  # noqa: E402
from qkv.web.models import ModelPool  # noqa: E402

LIMIT = schemas.MAX_BODY_BYTES
LONG = "Ω" * 10_000  # a run of it longer than 200 in an answer would be an echo


@pytest.fixture(scope="module")
def client(server_url):
    with httpx.Client(base_url=server_url, timeout=60) as c:
        yield c


def largest_scene_request() -> dict:
    """Every array at its largest size, every number at its longest JSON spelling."""
    n = -2.2250738585072014e-308  # repr is 24 characters
    H, L, d = schemas.MAX_HEADS, schemas.MAX_SCENE_TOKENS, schemas.MAX_DIMS
    heads = [[[n] * d for _ in range(d)] for _ in range(H)]
    return {
        "preset": "two-heads",
        "tokens": ["Ω" * schemas.MAX_TOKEN_CHARS] * L,
        "x": [[n] * d for _ in range(L)],
        "W_Q": heads,
        "W_K": heads,
        "W_V": heads,
        "W_O": heads,
        "b_O": [n] * d,
        "select": L - 1,
        "head": H - 1,
    }


def test_the_largest_legitimate_scene_fits_under_the_limit(client):
    body = json.dumps(largest_scene_request()).encode()
    assert LIMIT - 1024 * 1024 < len(body) < LIMIT  # the limit is close to what it must hold
    r = client.post("/api/trace", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text[:300]
    assert r.json()["settings"]["head"] == schemas.MAX_HEADS - 1
    assert client.get("/api/limits").json()["max_body_bytes"] == LIMIT


@pytest.mark.parametrize(
    "path", ["/api/trace", "/api/practice/check", "/api/model/trace", "/api/limits"]
)
def test_a_declared_body_past_the_limit_is_413_json(client, path):
    r = client.post(path, content=b" " * (LIMIT + 1), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json()["message"] == (
        f"the request body is {LIMIT + 1:,} bytes; this server reads at most {LIMIT:,} bytes"
    )
    assert r.headers["x-content-type-options"] == "nosniff"  # still behind the same headers


def test_a_streamed_body_past_the_limit_is_413_json(client):
    def chunks():  # no Content-Length: sent chunked, counted as it arrives
        for _ in range(LIMIT // 65536 + 2):
            yield b" " * 65536

    r = client.post("/api/trace", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "over the limit" in r.json()["message"]
    assert client.get("/api/limits").status_code == 200  # the server carries on


@pytest.mark.parametrize(
    "method, path, kwargs",
    [
        ("GET", f"/api/presets/{LONG[:60]}", {}),
        ("GET", f"/api/presets/{LONG}", {}),
        ("GET", "/api/practice", {"params": {"kind": LONG}}),
        ("GET", "/api/practice", {"params": {"topic": LONG}}),
        ("POST", "/api/practice/check", {"json": {"kind": LONG, "seed": 1, "answer": "1"}}),
        (
            "POST",
            "/api/practice/check",
            {"json": {"kind": "sizes/d_head", "seed": 1, "answer": LONG[:200]}},
        ),
        (
            "POST",
            "/api/practice/check",
            {"json": {"kind": "sizes/d_head", "seed": 1, "answer": LONG}},
        ),
        ("POST", "/api/trace", {"json": {"preset": LONG}}),
        ("POST", "/api/trace", {"json": {"tokens": [LONG]}}),
        ("POST", "/api/trace", {"json": {LONG: 1}}),
        ("POST", "/api/trace", {"json": {"x": LONG}}),
        (
            "POST",
            "/api/trace",
            {"content": LONG.encode(), "headers": {"content-type": "application/json"}},
        ),
        ("POST", "/api/model/trace", {"json": {"model": LONG, "text": "hi"}}),
        ("POST", "/api/model/trace", {"json": {"model": "minilm-l6", "text": " " * 400}}),
        ("POST", "/api/model/trace", {"json": {"model": "minilm-l6", "text": LONG}}),
        ("GET", f"/api/{LONG}", {}),
    ],
)
def test_errors_quote_at_most_200_characters_of_the_input(client, method, path, kwargs):
    r = client.request(method, path, **kwargs)
    assert 400 <= r.status_code < 500 or r.json().get("valid") is False, r.text[:300]
    assert "Ω" * 201 not in r.text and " " * 201 not in r.text
    assert len(r.text) < 2000, r.text[:300]


def _get_paths(app) -> list[str]:
    return [
        r.path.replace("{name}", "cat-sat") for r in api_routes(app.routes) if "GET" in r.methods
    ]


def test_head_is_answered_on_every_get_route(client):
    paths = _get_paths(create_app()) + ["/static/app.js", "/static/style.css"]
    assert {"/", "/api/limits", "/api/presets/cat-sat", "/api/practice"} <= set(paths)
    for path in paths:
        asked = {  # (query, status): a run or job that does not exist is a 404 with a body
            "/api/practice": ({"seed": 3}, 200),
            "/api/model/taxonomy": ({"model": "minilm-l6"}, 200),
            "/api/model/thumbnails": ({"run": "0" * 16}, 404),
        }
        params, want = asked.get(path, ({}, 404 if "{" in path else 200))
        got, head = client.get(path, params=params), client.head(path, params=params)
        assert got.status_code == head.status_code == want, path
        assert head.content == b"" and got.content, path
        assert head.headers["content-length"] == str(len(got.content)), path
        assert head.headers["content-type"] == got.headers["content-type"], path
    assert client.head("/api/trace").status_code == 405  # POST only, as for GET


def test_every_endpoint_runs_in_the_thread_pool():
    # an async endpoint would run the engine on the event loop and stall every other request
    routes = api_routes(create_app().routes)
    assert len(routes) >= 8
    coroutines = [r.path for r in routes if inspect.iscoroutinefunction(r.endpoint)]
    assert coroutines == []


def test_a_slow_model_load_does_not_stall_other_requests(serve, minilm):
    release = threading.Event()

    def slow_loader(name):
        release.wait(timeout=60)
        return minilm

    with serve(create_app(model_pool=ModelPool(slow_loader))) as url, ThreadPoolExecutor(1) as pool:
        slow = pool.submit(
            httpx.post,
            f"{url}/api/model/trace",
            json={"model": "minilm-l6", "text": "hi"},
            timeout=120,
        )
        try:  # while the model request waits in its loader, the others are answered
            assert httpx.get(f"{url}/api/limits", timeout=20).status_code == 200
            r = httpx.post(
                f"{url}/api/practice/check",
                timeout=20,
                json={"kind": "sizes/d_head", "seed": 1, "answer": "4"},
            )
            assert r.status_code == 200 and not slow.done()
        finally:
            release.set()
        assert slow.result().status_code == 200


def _wait_for_a_twin(barrier: threading.Barrier) -> None:
    """Meet a second concurrent call at ``barrier``, or go on alone when none comes."""
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass


def _two_at_once(serve, pool: ModelPool, text: str) -> list:
    """Two concurrent first requests for ``text`` over real HTTP; both answers, equal."""
    with serve(create_app(model_pool=pool)) as url, ThreadPoolExecutor(2) as threads:
        body = {"model": "minilm-l6", "text": text, "grid": False}
        answers = list(
            threads.map(
                lambda _: httpx.post(f"{url}/api/model/trace", json=body, timeout=120), range(2)
            )
        )
    assert [r.status_code for r in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()
    return answers


def test_two_first_requests_load_the_model_once(serve, minilm):
    calls = []
    both_inside = threading.Barrier(2, timeout=1.5)  # a second concurrent load would meet here

    def counting_loader(name):
        calls.append(name)
        _wait_for_a_twin(both_inside)
        return minilm

    _two_at_once(serve, ModelPool(counting_loader), "The cat sat")
    assert calls == ["minilm-l6"]


def test_two_first_requests_for_one_sentence_trace_it_once(serve, minilm):
    traced = []
    both_inside = threading.Barrier(2, timeout=1.5)  # a second concurrent trace would meet here

    class Counting:
        """MiniLM itself, with its trace calls counted."""

        def __getattr__(self, name):
            return getattr(minilm, name)

        def trace(self, text):
            traced.append(text)
            _wait_for_a_twin(both_inside)
            return minilm.trace(text)

    pool = ModelPool(loaded={"minilm-l6": Counting()})
    _two_at_once(serve, pool, "The dog ran")
    assert traced == ["The dog ran"]
    assert pool.pending == {}
