"""The page's what-if and taxonomy endpoints over real HTTP, on tiny local transformers
directories: the prediction before an edit equals the eager model's own softmax, after it equals
qkv.hf.compare on an independently loaded copy, the taxonomy equals qkv.hf.taxonomy run
directly, and a model or request that cannot be answered is a 422 saying why."""

from __future__ import annotations

import numpy as np
import pytest
from tiny import served_pair

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")
TEXT = "w5 w17 w33 w5 w17"
IDS = [5, 17, 33, 5, 17]


@pytest.fixture(scope="module")
def served(tmp_path_factory, serve):
    with served_pair(tmp_path_factory.mktemp("root"), serve) as (url, llama, eager):
        with httpx.Client(base_url=url) as client:
            yield client, llama, eager


def patch(client, **changes):
    body = {
        "model": "tiny-llama",
        "text": TEXT,
        "layer": 1,
        "head": 2,
        "edit": {"ablate": "zero"},
        "top_k": 5,
    } | changes
    return client.post("/api/model/patch", json=body)


def test_abilities_say_which_models_can_answer_and_why_not(served):
    rows = {r["name"]: r for r in served[0].get("/api/model/abilities").json()}
    assert rows["tiny-llama"]["what_if"] is True and rows["tiny-llama"]["what_if_why"] is None
    assert rows["minilm-l6"]["what_if"] is False
    assert "encoder" in rows["minilm-l6"]["what_if_why"]
    assert rows["tiny-bert"]["what_if"] is False
    assert "no next-token head" in rows["tiny-bert"]["what_if_why"]
    assert all(r["taxonomy"] for r in rows.values())


def test_before_is_the_eager_models_prediction(served):
    client, _, eager = served
    r = patch(client)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["tokens"] == [f"w{i}" for i in IDS]
    with torch.no_grad():
        p = torch.softmax(eager(input_ids=torch.tensor([IDS])).logits[0, -1].double(), -1)
    top = torch.topk(p, 5)
    assert [c["token"] for c in got["before"]] == [f"w{i}" for i in top.indices.tolist()]
    np.testing.assert_allclose([c["p"] for c in got["before"]], top.values.numpy(), rtol=1e-4)


@pytest.mark.parametrize(
    "edit", [{"ablate": "zero"}, {"pin": "uniform"}, {"tau": 0.25}, {"knockout": 1}]
)
def test_after_equals_compare_on_an_independent_load(served, edit):
    import qkv.hf
    from qkv.hf import loading

    client, path, _ = served
    r = patch(client, edit=edit)
    assert r.status_code == 200, r.text
    got = r.json()
    model, tokenizer, _ = loading.load(str(path))
    inputs = {"input_ids": torch.tensor([IDS]), "attention_mask": torch.ones(1, len(IDS))}
    want = qkv.hf.compare(model, inputs, {"1.2": edit}, tokenizer=tokenizer, top_k=5)
    assert [(c["token"]) for c in got["after"]] == [t for t, _ in want.after]
    np.testing.assert_allclose(
        [c["p"] for c in got["after"]], [p for _, p in want.after], rtol=1e-9
    )
    assert got["kl"] == pytest.approx(want.kl, rel=1e-9, abs=1e-12)
    assert got["edit"] == want.edits[0]
    assert got["summary"].startswith("the likeliest next token ")


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"edit": {"knockout": 5}}, "edit.knockout", "must be in [0, 5)"),
        ({"edit": {}}, "edit", "exactly one of"),
        ({"edit": {"ablate": "zero", "tau": 2.0}}, "edit", "exactly one of"),
        ({"edit": {"tau": 0}}, "edit.tau", "greater than or equal"),
        ({"edit": {"ablate": "mean"}}, "edit.ablate", "'zero'"),
        ({"layer": 2}, "layer", "[0, 2)"),
        ({"head": 4}, "head", "[0, 4)"),
        ({"text": "   "}, "text", "non-space"),
        ({"model": "tiny-bert"}, "model", "no next-token head"),
        ({"model": "minilm-l6"}, "model", "encoder"),
        ({"model": "../tiny-llama"}, "model", "tiny-llama"),
        ({"top_k": 21}, "top_k", "less than or equal to 20"),
    ],
)
def test_a_bad_what_if_is_a_422_naming_the_field(served, changes, field, words):
    r = patch(served[0], **changes)
    assert r.status_code == 422, r.text
    message = r.json()["message"]
    assert message.startswith(field + ":") and words in message, message


def test_the_taxonomy_equals_qkv_hf_taxonomy_run_directly(served):
    from qkv.hf import taxonomy
    from qkv.hf.local import open_dir

    client, path, _ = served
    r = client.get("/api/model/taxonomy", params={"model": "tiny-llama"})
    assert r.status_code == 200, r.text
    got = r.json()
    want = taxonomy.measure(open_dir(path))
    assert [k["name"] for k in got["kinds"]] == list(taxonomy.KINDS)
    for kind in taxonomy.KINDS:
        np.testing.assert_allclose(got["scores"][kind], getattr(want, kind), rtol=1e-6)
    assert (got["half"], got["sequences"]) == (want.half, want.sequences)
    assert client.get("/api/model/taxonomy", params={"model": "/etc"}).status_code == 422
