"""The what-if route when what it answers from has changed since the server started: the
model's directory gone, truncated or holding another model before its first what-if, or a
request naming a layer, head or token the text no longer has. Each is a 4xx saying what, over
real HTTP, never a 500; a model already loaded keeps answering from memory."""

from __future__ import annotations

import shutil

import pytest
from tiny import SMALL, save_local

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")
TEXT = "w5 w17 w33 w5 w17"  # 5 tokens


@pytest.fixture
def served(tmp_path, serve):
    """(client, directory) of a server offering one tiny Llama directory, loaded now."""
    from qkv.hf.local import open_dir
    from qkv.web.app import create_app
    from qkv.web.models import ModelPool

    path = tmp_path / "tiny-llama"
    save_local("llama", path)
    pool = ModelPool(local={"tiny-llama": open_dir(path)})
    with serve(create_app(model_pool=pool)) as url, httpx.Client(base_url=url) as client:
        yield client, path


def patch(client, **changes):
    body = {"model": "tiny-llama", "text": TEXT, "layer": 1, "head": 2,
            "edit": {"ablate": "zero"}} | changes  # fmt: skip
    return client.post("/api/model/patch", json=body)


def assert_4xx_naming(r, field: str, *words: str):
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    body = r.json()
    assert body["detail"][0]["loc"][-1] == field, body
    assert all(w in body["message"] for w in words), body["message"]


def test_a_directory_gone_before_the_first_what_if_is_a_4xx(served):
    client, path = served
    shutil.rmtree(path)
    assert_4xx_naming(patch(client), "model", "tiny-llama")
    r = client.post("/api/model/trace", json={"model": "tiny-llama", "text": TEXT})
    assert r.status_code == 200, r.text  # the trace runs on the copy loaded at start


def test_truncated_weights_before_the_first_what_if_are_a_4xx(served):
    client, path = served
    weights = path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    assert_4xx_naming(patch(client), "model", "tiny-llama")


@pytest.mark.parametrize(
    "sizes", [{"num_hidden_layers": 1}, {"num_attention_heads": 2, "num_key_value_heads": 1}]
)
def test_a_directory_now_holding_another_model_is_a_4xx(served, sizes):
    client, path = served
    shutil.rmtree(path)
    save_local("llama", path, config=SMALL | sizes)
    assert_4xx_naming(patch(client, layer=0, head=0), "model", "tiny-llama", "changed")


def test_the_same_sizes_with_other_weights_are_a_4xx(served):
    from safetensors.torch import load_file, save_file

    client, path = served
    weights = path / "model.safetensors"
    tensors = load_file(weights)
    name = next(n for n in sorted(tensors) if n.endswith("o_proj.weight"))
    tensors[name] = tensors[name] + 1.0
    save_file(tensors, weights, metadata={"format": "pt"})
    assert_4xx_naming(patch(client), "model", "tiny-llama", "changed", "other weights")


def test_a_what_if_loaded_before_the_directory_went_keeps_answering(served):
    client, path = served
    first = patch(client)
    assert first.status_code == 200, first.text
    shutil.rmtree(path)
    again = patch(client)
    assert again.status_code == 200, again.text
    assert again.json()["after"] == first.json()["after"]


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"layer": 2}, "layer", ("[0, 2)",)),
        ({"head": 4}, "head", ("[0, 4)",)),
        ({"edit": {"knockout": 5}}, "edit.knockout", ("[0, 5)", "5 tokens")),
        ({"text": "w5 w17", "edit": {"knockout": 3}}, "edit.knockout", ("[0, 2)",)),
        ({"model": "gone-model"}, "model", ()),
    ],
)
def test_a_layer_head_or_token_the_request_no_longer_has_is_a_422(served, changes, field, words):
    client, _ = served
    r = patch(client, **changes)
    assert r.status_code == 422, r.text
    assert_4xx_naming(r, field, *words)
