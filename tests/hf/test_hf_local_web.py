"""`qkv serve --model DIR`: a local transformers directory offered by the page's model mode, over
real HTTP; its weights equal transformers eager's, and a request naming any other model (a path
included) is a 422 that loads nothing."""

from __future__ import annotations

import numpy as np
import pytest
from tiny import save_local

from qkv.trace import Trace  # noqa: E402

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")
TEXT = "w5 w17 w33 w5 w17"
IDS = [5, 17, 33, 5, 17]


@pytest.fixture(scope="module")
def served(tmp_path_factory, serve):
    from qkv.hf.local import open_dir
    from qkv.web.app import create_app
    from qkv.web.models import ModelPool

    path = tmp_path_factory.mktemp("root") / "tiny-llama"
    path.mkdir()
    model = save_local("llama", path)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([IDS]), output_attentions=True)
    eager = np.stack([a[0].numpy() for a in out.attentions])  # (n_layers, n_heads, L, L)
    pool = ModelPool(local={"tiny-llama": open_dir(path)})
    with serve(create_app(model_pool=pool)) as url, httpx.Client(base_url=url) as client:
        yield client, path, eager


def test_the_served_directory_is_listed(served):
    client = served[0]
    listed = {m["name"]: m for m in client.get("/api/models").json()}
    assert list(listed) == ["minilm-l6", "smollm2-135m", "tiny-llama"]
    assert listed["tiny-llama"] == {
        "name": "tiny-llama",
        "local": True,
        "installed": True,
        "n_layers": 2,
        "n_heads": 4,
        "n_kv_heads": 2,
        "d_model": 32,
        "d_head": 8,
        "max_tokens": 64,  # the config's max_position_embeddings
        "max_chars": 512,  # 8 characters a token
        "panel_tokens": 32,
    }
    assert listed["minilm-l6"]["local"] is False


def test_a_served_directory_answers_with_eagers_weights(served):
    client, _, eager = served
    r = client.post(
        "/api/model/trace",
        json={"model": "tiny-llama", "text": TEXT, "layer": 1, "head": 2, "select": 3},
    )
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["tokens"] == [f"w{i}" for i in IDS]
    head = Trace.from_dict(got["trace"])
    np.testing.assert_allclose(head["weights"], eager[1, 2], atol=1e-6)
    assert got["grid"]["shape"] == [2, 4, 5, 5]
    assert got["selected"]["head"] == 2


@pytest.mark.parametrize("model", ["{path}", "{path}/", "/etc", "HuggingFaceTB/SmolLM2-135M"])
def test_a_request_naming_an_unlisted_model_is_422(served, model):
    client, path = served[:2]
    r = client.post("/api/model/trace", json={"model": model.format(path=path), "text": TEXT})
    assert r.status_code == 422, r.text
    assert r.json()["message"].startswith("model")
    assert "tiny-llama" in r.json()["message"]  # the allowed names are listed


def test_names_of_bundled_models_cannot_be_taken(tmp_path):
    from qkv.web.models import ModelPool

    with pytest.raises(ValueError, match="must differ from the bundled"):
        ModelPool(local={"minilm-l6": object()})


def test_serve_refuses_a_directory_it_cannot_offer(tmp_path):
    from click.testing import CliRunner

    from qkv.cli import main

    result = CliRunner().invoke(main, ["serve", "--port", "0", "--model", str(tmp_path)])
    assert result.exit_code == 2 and "directory holding config.json" in result.output
    clash = tmp_path / "minilm-l6"
    clash.mkdir()
    save_local("llama", clash)
    result = CliRunner().invoke(main, ["serve", "--port", "0", "--model", str(clash)])
    assert result.exit_code == 2, result.output
    assert "a model named 'minilm-l6' is already offered" in result.output


def test_a_served_model_with_sinks_shows_the_sink_step(tmp_path, serve):
    from qkv.hf.local import open_dir
    from qkv.web.app import create_app
    from qkv.web.models import ModelPool

    path = tmp_path / "tiny-gpt-oss"
    # transformers' grouped experts kernel wants rows of a multiple of 16 bytes: 48 floats
    eager = save_local("gpt_oss", path, config={"intermediate_size": 48})
    with torch.no_grad():
        out = eager(input_ids=torch.tensor([IDS]), output_attentions=True)
    kept = out.attentions[0][0, 1].numpy()  # (L, L): eager drops the sink's column
    pool = ModelPool(local={"tiny-gpt-oss": open_dir(path)})
    with serve(create_app(model_pool=pool)) as url, httpx.Client(base_url=url) as client:
        r = client.post(
            "/api/model/trace",
            json={"model": "tiny-gpt-oss", "text": TEXT, "layer": 0, "head": 1, "select": 2},
        )
    assert r.status_code == 200, r.text
    got = r.json()
    head = Trace.from_dict(got["trace"])
    np.testing.assert_allclose(head["weights"], kept, atol=1e-6)
    np.testing.assert_allclose(head["sink"][:, 0], 1 - kept.sum(axis=-1), atol=1e-6)
    assert got["selected"]["sink"] == pytest.approx(1 - kept[2].sum(), abs=1e-6)
    assert got["selected"]["sum_with_sink"] == pytest.approx(1.0, abs=1e-6)
    (softmax,) = [s for s in got["walkthrough"] if s["title"].startswith("4.")]
    assert softmax["title"].endswith("(softmax with a sink)")
    assert any(line.strip().startswith("sink ") for line in softmax["lines"])


def test_a_model_that_fails_on_a_text_is_named_never_a_500(tmp_path, serve):
    from qkv.hf.local import open_dir
    from qkv.web.app import create_app
    from qkv.web.models import ModelPool

    path = tmp_path / "tiny-gpt-oss"
    save_local("gpt_oss", path)  # 37-float expert rows: transformers' grouped kernel may refuse
    pool = ModelPool(local={"tiny-gpt-oss": open_dir(path)})
    with serve(create_app(model_pool=pool)) as url, httpx.Client(base_url=url) as client:
        r = client.post("/api/model/trace", json={"model": "tiny-gpt-oss", "text": TEXT})
    assert r.status_code in (200, 422), r.text
    if r.status_code == 422:
        assert r.json()["message"].startswith("model: tiny-gpt-oss could not run this text: ")
