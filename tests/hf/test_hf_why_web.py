"""POST /api/model/attribute over real HTTP, on a tiny local transformers directory: the panel's
shares add up to the eager model's own logit difference, every head's per-key parts add up to
its share and weigh keys as the eager model's attention does, one head's patching score equals
the eager model patched by hand, and bad requests are 422s naming their field."""

from __future__ import annotations

import numpy as np
import pytest
from tiny import patched_by_hand, served_pair

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")
TEXT = "w5 w17 w33 w5 w17 w40"
IDS = [5, 17, 33, 5, 17, 40]
CORRUPTED = "w5 w17 w9 w5 w17 w40"  # position 2 differs


@pytest.fixture(scope="module")
def served(tmp_path_factory, serve):
    with served_pair(tmp_path_factory.mktemp("root"), serve) as (url, _, eager):
        with httpx.Client(base_url=url, timeout=120) as client:
            yield client, eager


def ask(client, **changes):
    return client.post("/api/model/attribute", json={"model": "tiny-llama", "text": TEXT} | changes)


def logits_of(eager, ids):
    with torch.no_grad():
        return eager(input_ids=torch.tensor([ids])).logits[0, -1].double()


def test_the_target_defaults_to_the_likeliest_token_and_the_shares_add_up(served):
    client, eager = served
    r = ask(client)
    assert r.status_code == 200, r.text
    got = r.json()
    logits = logits_of(eager, IDS)
    top = int(logits.argmax())
    assert got["prediction"]["id"] == top and got["prediction"]["label"] == f"w{top}"
    assert got["prediction"]["p"] == pytest.approx(float(torch.softmax(logits, -1)[top]), rel=1e-5)
    panel = got["panel"]
    assert panel["target"]["id"] == top and panel["baseline"] is None
    assert panel["quantity"] == f"logit(w{top})"
    s = panel["shares"]
    heads = np.array(panel["grids"]["attribution"]["values"])
    assert heads.shape == (2, 4) and np.abs(heads).max() > 1e-3
    total = s["embed"] + heads.sum() + sum(panel["mlp"]) + s["rest"]  # the grid's own sum
    assert total == pytest.approx(float(logits[top]), rel=1e-4)  # the eager model's logit
    assert panel["logit_diff"] == pytest.approx(float(logits[top]), rel=1e-4)


def test_every_head_is_split_by_key_and_its_parts_add_up(served):
    client, eager = served
    got = ask(client, target="w3", baseline="w4").json()
    panel = got["panel"]
    heads = np.array(panel["grids"]["attribution"]["values"])
    logits = logits_of(eager, IDS)
    want = float(logits[3] - logits[4])
    s = panel["shares"]
    assert s["embed"] + heads.sum() + sum(panel["mlp"]) + s["rest"] == pytest.approx(want, rel=1e-4)
    with torch.no_grad():
        attentions = eager(input_ids=torch.tensor([IDS]), output_attentions=True).attentions
    assert sorted(panel["splits"]) == [f"{i}.{h}" for i in range(2) for h in range(4)]
    for key, split in panel["splits"].items():
        layer, head = (int(x) for x in key.split("."))
        parts = [k["part"] for k in split["keys"]]
        assert sum(parts) == pytest.approx(heads[layer, head], rel=1e-4, abs=1e-6)
        weights = [k["weight"] for k in split["keys"]]
        np.testing.assert_allclose(weights, attentions[layer][0, head, -1], atol=1e-6)
        assert [k["token"] for k in split["keys"]] == [
            "w5@0",
            "w17@1",
            "w33",
            "w5@3",
            "w17@4",
            "w40",
        ]


def test_with_a_corrupted_prompt_the_grid_is_the_patching_score(served):
    client, eager = served
    layer, head = 0, 2
    r = ask(client, target="w3", baseline="w4", corrupted=CORRUPTED)
    assert r.status_code == 200, r.text
    panel = r.json()["panel"]
    assert panel["colour"] == "patching"
    bad = [int(w[1:]) for w in CORRUPTED.split()]

    def ld(ids):  # the logit difference target − baseline: w3 − w4
        logits = logits_of(eager, ids)
        return float(logits[3] - logits[4])

    ld_clean, ld_bad, ld_patched = patched_by_hand(eager, layer, head, IDS, bad, ld)
    score = panel["grids"]["patching"]["values"][layer][head]
    assert score == pytest.approx((ld_patched - ld_bad) / (ld_clean - ld_bad), abs=1e-4)
    assert panel["patching"]["clean"] == pytest.approx(ld_clean, abs=1e-4)
    assert panel["patching"]["corrupted_tokens"][2] == "w9"


def test_abilities_say_which_models_can_be_explained(served):
    rows = {r["name"]: r for r in served[0].get("/api/model/abilities").json()}
    assert rows["tiny-llama"]["attribute"] is True and rows["tiny-llama"]["attribute_why"] is None
    assert rows["tiny-bert"]["attribute"] is False
    assert "no next-token head" in rows["tiny-bert"]["attribute_why"]
    assert "encoder" in rows["minilm-l6"]["attribute_why"]


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"target": "w3 w4"}, "target", "is not a single token"),
        ({"baseline": "w3 w4"}, "baseline", "is not a single token"),
        ({"target": "w3", "baseline": "w3"}, "baseline", "must differ from target"),
        ({"corrupted": "w5 w17"}, "corrupted", "same number of tokens, got 6 (clean) and 2"),
        ({"corrupted": TEXT}, "corrupted", "give the same logit difference"),
        ({"corrupted": " "}, "corrupted", "non-space"),
        ({"text": "   "}, "text", "non-space"),
        ({"text": " ".join(["w5"] * 33)}, "text", "at most 32 tokens"),
        ({"model": "tiny-bert"}, "model", "no next-token head"),
        ({"model": "minilm-l6"}, "model", "encoder"),
        ({"model": "/etc"}, "model", "tiny-llama"),
        ({"target": ""}, "target", "at least 1 character"),
        ({"layer": 0}, "layer", "not permitted"),
    ],
)
def test_a_bad_request_is_a_422_naming_the_field(served, changes, field, words):
    r = ask(served[0], **changes)
    assert r.status_code == 422, r.text
    message = r.json()["message"]
    assert message.startswith(field + ":") and words in message, message
