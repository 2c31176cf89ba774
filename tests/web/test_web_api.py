"""The simulator's JSON API over real HTTP, against a server started for the session.

Numbers are checked against an independent float64 reference (web_reference) and against the
engine's own trace (the API must return exactly what the engine computed)."""

from __future__ import annotations

import http.client
import json
import math
from urllib.parse import urlsplit

import numpy as np
import pytest

httpx = pytest.importorskip("httpx", reason="httpx is not installed (dev extra)")

from web_reference import multi_head, single_head  # noqa: E402

from qkv import presets  # noqa: E402
from qkv.explain.walkthrough import walkthrough  # noqa: E402
from qkv.trace import Trace  # noqa: E402


@pytest.fixture(scope="module")
def client(server_url):
    with httpx.Client(base_url=server_url, timeout=30) as c:
        yield c


def post(client, body):
    return client.post("/api/trace", json=body)


def test_presets_are_listed_default_first(client):
    r = client.get("/api/presets")
    assert r.status_code == 200
    got = r.json()
    assert [s["name"] for s in got] == presets.names()
    assert got[0]["name"] == "cat-sat" and got[0]["tokens"] == [
        "the",
        "cat",
        "sat",
        "on",
        "the",
        "mat",
    ]
    assert [s["n_heads"] for s in got] == [None, None, None, None, 2]


@pytest.mark.parametrize("name", presets.names())
def test_every_preset_traces_to_the_reference(client, name):
    scene = presets.load(name)
    r = post(client, {"preset": name})
    assert r.status_code == 200, r.text
    body = r.json()
    trace = Trace.from_dict(body["trace"])
    i = scene.select
    assert body["settings"]["select"] == i
    if scene.W_O is None:
        w, z = single_head(scene.x, scene.W_Q, scene.W_K, scene.W_V, scaled=scene.scaled)
        np.testing.assert_allclose(trace["weights"], w, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(trace["z"], z, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(
            body["selected"]["contributions"],
            w[i][:, None] * (scene.x @ scene.W_V),
            rtol=1e-12,
            atol=1e-15,
        )
    else:
        w, z, out = multi_head(scene.x, scene.W_Q, scene.W_K, scene.W_V, scene.W_O, scene.b_O)
        np.testing.assert_allclose(trace["weights"], w, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(trace["out"], out, rtol=1e-12, atol=1e-15)
    assert body["selected"]["weights_sum"] == pytest.approx(1.0, abs=1e-12)


def test_numbers_equal_the_engines_exactly(client):
    scene = presets.load("bank")
    r = post(client, {"preset": "bank", "temperature": 0.37, "causal": True, "select": 5})
    got = Trace.from_dict(r.json()["trace"])
    want = scene.trace(temperature=0.37, causal="bottom-right")
    assert set(got.steps) == set(want.steps)
    for name in want.steps:
        assert np.array_equal(got[name], want[name]), name  # -inf in 'masked' included
    assert np.isneginf(got["masked"][5, 6:]).all() and (got["weights"][5, 6:] == 0).all()
    sections = [{"title": s.title, "lines": list(s.lines)} for s in walkthrough(want, 5)]
    assert r.json()["walkthrough"] == sections


def test_settings_change_the_numbers_as_the_reference_does(client):
    scene = presets.load("cat-sat")
    r = post(
        client,
        {
            "preset": "cat-sat",
            "select": 1,
            "temperature": 0.25,
            "scaled": False,
            "causal": True,
            "align": "top-left",
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    w, z = single_head(
        scene.x, scene.W_Q, scene.W_K, scene.W_V, tau=0.25, scaled=False, causal=True
    )
    trace = Trace.from_dict(body["trace"])
    np.testing.assert_allclose(trace["weights"], w, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(trace["z"], z, rtol=1e-12, atol=1e-15)
    sel = body["selected"]
    assert sel["visible_keys"] == 2  # 'cat' (index 1) sees 'the' and itself
    ent = -sum(p * math.log(p) for p in w[1] if p > 0)
    assert sel["entropy"] == pytest.approx(ent, rel=1e-12)
    assert sel["effective_tokens"] == pytest.approx(math.exp(ent), rel=1e-12)
    assert body["trace"]["steps"]["masked"]["data"][1][2] == "-inf"


def test_two_token_worked_example_by_hand(client):
    # X = I, QKᵀ = [[0, 1], [1, 0]], unscaled: row 0 weights [1, e]/(1 + e), z = w·[[2, 0], [0, 3]]
    body = post(client, {"preset": "two-token"}).json()
    w = np.array(body["trace"]["steps"]["weights"]["data"][0])
    e = math.e
    np.testing.assert_allclose(w, [1 / (1 + e), e / (1 + e)], rtol=1e-14)
    np.testing.assert_allclose(
        body["trace"]["steps"]["z"]["data"][0], [2 / (1 + e), 3 * e / (1 + e)], rtol=1e-14
    )


def test_user_tokens_x_and_weights(client):
    rng = np.random.default_rng(7)
    L, d_model, d_k, d_v = 5, 7, 3, 11
    x, W_Q, W_K, W_V = (
        rng.normal(size=s).round(3)
        for s in [(L, d_model), (d_model, d_k), (d_model, d_k), (d_model, d_v)]
    )
    r = post(
        client,
        {
            "preset": "cat-sat",
            "tokens": list("abcde"),
            "x": x.tolist(),
            "W_Q": [W_Q.tolist()],
            "W_K": [W_K.tolist()],
            "W_V": [W_V.tolist()],
            "select": 4,
            "temperature": 2.0,
        },
    )
    assert r.status_code == 200, r.text
    w, z = single_head(x, W_Q, W_K, W_V, tau=2.0)
    trace = Trace.from_dict(r.json()["trace"])
    np.testing.assert_allclose(trace["weights"], w, rtol=1e-12)
    np.testing.assert_allclose(trace["z"], z, rtol=1e-12)
    assert r.json()["scene"]["tokens"] == list("abcde") and r.json()["scene"]["d_model"] == 7


def test_user_weights_multi_head(client):
    scene = presets.load("two-heads")
    W_O = scene.W_O.copy()
    W_O[1] *= -0.5
    r = post(
        client,
        {
            "preset": "two-heads",
            "W_O": W_O.tolist(),
            "head": 1,
            "select": 3,
            "temperature": 0.5,
            "causal": True,
        },
    )
    assert r.status_code == 200, r.text
    w, z, out = multi_head(
        scene.x, scene.W_Q, scene.W_K, scene.W_V, W_O, scene.b_O, tau=0.5, causal=True
    )
    body = r.json()
    trace = Trace.from_dict(body["trace"])
    np.testing.assert_allclose(trace["out"], out, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(
        body["selected"]["contributions"], w[1, 3][:, None] * (scene.x @ scene.W_V[1]), atol=1e-15
    )
    assert body["walkthrough"][1]["title"].endswith("(head 1)")


def test_preset_detail_has_the_numbers_with_a_head_axis(client):
    scene = presets.load("cat-sat")
    body = client.get("/api/presets/cat-sat").json()
    assert np.array_equal(body["x"], scene.x)
    assert np.array_equal(body["W_Q"], scene.W_Q[None]) and body["W_O"] is None
    two = client.get("/api/presets/two-heads").json()
    assert np.array_equal(two["W_O"], presets.load("two-heads").W_O)
    r = client.get("/api/presets/nope")
    assert r.status_code == 404 and "unknown preset 'nope'" in r.json()["message"]


BAD = [  # (body, field named in the message, words the message must contain)
    ({"temperature": 0}, "temperature", "greater than or equal to 0.001"),
    ({"temperature": -1.5}, "temperature", "greater than"),
    ({"temperature": "1"}, "temperature", "valid number"),
    ({"temperature": True}, "temperature", "valid number"),
    ({"temperature": None}, "temperature", "valid number"),
    ({"x": [[1, 2, 3]] * 5 + [[1, 2]]}, "x", "rectangular"),
    ({"x": [[1, "a", 3]] * 6}, "x.0.1", "valid number"),
    ({"x": [[1, None, 3]] * 6}, "x.0.1", "valid number"),
    ({"x": [[1, 2, 3]] * 5}, "x", "one row per token"),
    ({"x": [[1e6, 0, 0]] * 6}, "x.0.0", "less than or equal to 1000"),
    ({"tokens": ["t"] * 65, "x": [[0.0]] * 65}, "tokens", "at most 64"),
    ({"x": [[0.0] * 65] * 6}, "x.0", "at most 64"),
    ({"tokens": []}, "tokens", "at least 1"),
    ({"tokens": ["a" * 33] + ["b"] * 5}, "tokens.0", "at most 32"),
    ({"W_Q": [[[1, 2, 3]] * 2]}, "W_Q", "(n_heads, d_model, d_head) = (1, 3, 3), got (1, 2, 3)"),
    ({"W_K": [[[1, 0, 0]] * 2]}, "W_K", "shape"),
    (
        {"W_Q": [[[0.0] * 3] * 3] * 2, "W_K": [[[0.0] * 3] * 3] * 2, "W_V": [[[0.0] * 3] * 3] * 2},
        "W_Q",
        "single-head",
    ),
    ({"W_O": [[[1.0]]]}, "W_O", "only for multi-head"),
    ({"preset": "two-heads", "b_O": [0.0] * 7}, "b_O", "(d_model,) = (8,)"),
    ({"preset": "two-heads", "W_O": [[[0.0] * 8] * 4] * 3}, "W_O", "(2, 4, 8)"),
    ({"select": 6}, "select", "[0, 6)"),
    ({"select": -1}, "select", "greater than or equal to 0"),
    ({"select": 1.5}, "select", "valid integer"),
    ({"select": "2"}, "select", "valid integer"),
    ({"preset": "two-heads", "head": True}, "head", "valid integer"),
    ({"preset": "two-heads", "head": 2}, "head", "[0, 2)"),
    ({"head": 1}, "head", "single head"),
    ({"preset": "two-heads", "scaled": False}, "scaled", "always scales"),
    ({"preset": "nope"}, "preset", "choose one of"),
    ({"causal": "yes"}, "causal", "valid boolean"),
    ({"align": "middle"}, "align", "'bottom-right' or 'top-left'"),
    ({"tau": 1.0}, "tau", "Extra inputs are not permitted"),
]


@pytest.mark.parametrize("body, field, words", BAD, ids=[f"{b[1]}-{n}" for n, b in enumerate(BAD)])
def test_bad_requests_are_4xx_naming_the_field(client, body, field, words):
    r = post(client, body)
    assert 400 <= r.status_code < 500, r.text
    message = r.json()["message"]
    assert message.startswith(f"{field}:") or f"; {field}:" in message, message
    assert words in message, message


@pytest.mark.parametrize(
    "raw, field",
    [
        (b'{"temperature": NaN}', "temperature"),
        (b'{"temperature": Infinity}', "temperature"),
        (
            b'{"x": [[-Infinity, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]]}',
            "x.0.0",
        ),
        (b'{"select": 1', None),
        (b"[1, 2, 3]", None),
        (b"", None),
    ],
)
def test_non_finite_and_malformed_json_are_422(client, raw, field):
    r = client.post("/api/trace", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    message = r.json()["message"]
    if field:
        assert message.startswith(f"{field}:") and "finite number" in message, message


def _raw_get(server_url: str, path: str) -> tuple[int, bytes]:
    """GET with the path sent byte for byte (httpx would normalise '..' away)."""
    u = urlsplit(server_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.putrequest("GET", path, skip_host=False, skip_accept_encoding=True)
    conn.endheaders()
    resp = conn.getresponse()
    out = resp.status, resp.read()
    conn.close()
    return out


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/%2e%2e/app.py",
        "/static/..%2fapp.py",
        "/static/../../../../etc/passwd",
        "/static/%2e%2e/%2e%2e/__init__.py",
        "/static//etc/passwd",
    ],
)
def test_static_files_stay_in_their_folder(server_url, path):
    status, body = _raw_get(server_url, path)
    assert status == 404, (path, status)
    assert b"create_app" not in body and b"root:" not in body


def test_page_and_its_files_are_served_with_a_strict_policy(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert "http://" not in r.text and "https://" not in r.text  # nothing from elsewhere
    for name in (
        "app.js",
        "api.js",
        "panels.js",
        "render.js",
        "diagram.js",
        "heatmap.js",
        "mix.js",
        "editors.js",
        "formula.js",
        "dom.js",
        "style.css",
        "views.css",
    ):
        f = client.get(f"/static/{name}")
        assert f.status_code == 200, name
        text = f.text.replace('"http://www.w3.org/1998/Math/MathML"', "")  # a namespace name
        assert "http://" not in text and "https://" not in text, name


def test_openapi_schema_is_served_and_docs_are_off(client):
    schema = client.get("/api/openapi.json").json()
    assert {"/api/presets", "/api/presets/{name}", "/api/trace"} <= set(schema["paths"])
    props = schema["components"]["schemas"]["TraceRequest"]["properties"]
    assert (
        props["temperature"]["minimum"] == 0.001 and props["tokens"]["anyOf"][0]["maxItems"] == 64
    )
    assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404


def test_unknown_routes_and_methods_are_4xx_json(client):
    r = client.get("/api/nothing")
    assert r.status_code == 404 and "Not Found" in r.json()["message"]
    r = client.get("/api/trace")
    assert r.status_code == 405 and json.loads(r.text)["message"]


def test_the_limits_themselves_are_accepted_and_stay_finite(client):
    # 64 tokens × 64 dims, every entry at ±1000, τ at its minimum: scores ~1e17, still finite
    rng = np.random.default_rng(3)
    x = 1000.0 * rng.choice([-1.0, 1.0], size=(64, 64))
    W = 1000.0 * rng.choice([-1.0, 1.0], size=(3, 64, 64))
    r = post(
        client,
        {
            "preset": "cat-sat",
            "tokens": [f"t{j}" for j in range(64)],
            "x": x.tolist(),
            "W_Q": [W[0].tolist()],
            "W_K": [W[1].tolist()],
            "W_V": [W[2].tolist()],
            "select": 63,
            "temperature": 0.001,
            "causal": True,
        },
    )
    assert r.status_code == 200, r.text[:300]
    trace = Trace.from_dict(r.json()["trace"])
    w = trace["weights"]
    assert np.isfinite(w).all() and np.isfinite(trace["z"]).all()
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=1e-12)
    assert (w[np.triu_indices(64, k=1)] == 0).all()
