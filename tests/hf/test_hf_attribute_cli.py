"""`qkv attribute` on a local transformers directory (a tiny Llama whose tokenizer spells words
as a byte-level BPE does, "Ġw5"): the JSON's shape and sums, the picture, one-line errors; and
`qkv patch` naming tokens as qkv does (␣w5, not Ġw5)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from tiny import save_local

from qkv.cli import main  # noqa: E402

torch = pytest.importorskip("torch")
TEXT = "w5 w17 w33 w5 w17 w40 w2"
CORRUPTED = "w5 w17 w33 w9 w17 w40 w2"


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama-bpe")
    return path, save_local("llama", path, mark="Ġ")


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)))


def attribute(path, *args):
    return run("attribute", "--model", path, "--text", TEXT, *args)


def test_the_json_holds_every_share_and_they_sum_to_the_logit_difference(local):
    path, model = local
    result = attribute(
        path, "--target", "␣w7", "--baseline", "␣w9", "--corrupted", CORRUPTED, "--top", 3, "--json"
    )
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    ids = torch.tensor([[5, 17, 33, 5, 17, 40, 2]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, -1].double()
    want = float(logits[7] - logits[9])
    assert got["logit_diff"] == pytest.approx(want, rel=1e-4)
    assert got["target"] == {"token": " w7", "id": 7}
    assert got["baseline"] == {"token": " w9", "id": 9}
    total = got["embed"] + sum(map(sum, got["heads"])) + sum(got["mlp"]) + got["rest"]
    assert total == pytest.approx(want, rel=1e-4)
    assert [len(row) for row in got["heads"]] == [4, 4] and len(got["mlp"]) == 2
    assert len(got["by_key"]) == 3
    for split in got["by_key"]:
        assert set(split) == {"layer", "head", "value", "weights", "parts"}
        assert len(split["parts"]) == 7
        assert sum(split["parts"]) == pytest.approx(split["value"], rel=1e-4, abs=1e-5)
    assert [len(row) for row in got["patching"]["heads"]] == [4, 4]
    assert got["patching"]["corrupted_tokens"][3] == " w9"
    assert [layer["layer"] for layer in got["lens"]] == [0, 1]
    last = got["lens"][-1]
    top = torch.topk(torch.softmax(logits, -1), 5)
    assert [t["id"] for t in last["top"]] == top.indices.tolist()
    assert last["top"][0]["token"] == f" w{top.indices[0].item()}"
    assert last["top"][0]["p"] == pytest.approx(top.values[0].item(), rel=1e-5)
    assert last["target_rank"] == 1 + int((logits > logits[7]).sum())


def test_the_report_and_the_picture(local, tmp_path):
    png = tmp_path / "why.png"
    result = attribute(
        local[0], "--target", "␣w7", "--corrupted", CORRUPTED, "--png", png, "--format", "plain"
    )
    assert result.exit_code == 0, result.output
    assert "logit(␣w7) after" in result.output and "top 5 heads by |share|" in result.output
    assert "logit lens" in result.output and "activation patching" in result.output
    assert "Ġ" not in result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {png}" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target", "␣w7 w8"], "Error: target '␣w7 w8' is not a single token"),
        (["--target", "␣w7", "--baseline", "w1 w2"], "Error: baseline 'w1 w2' is not a single"),
        (
            ["--target", "␣w7", "--corrupted", "w5 w17"],
            "same number of tokens, got 7 (clean) and 2 (corrupted)",
        ),
        (["--target", "␣w7", "--corrupted", TEXT], "give the same logit difference"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(local, args, message):
    result = attribute(local[0], *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    # one line (transformers may draw its loading bar on stderr before it)
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: ") and message in last


def test_a_model_without_a_next_token_head_is_one_line():
    result = run("attribute", "--model", "minilm-l6", "--text", "a b", "--target", "b")
    assert result.exit_code == 2 and "encoder without a next-token head" in result.output


def test_patch_names_tokens_as_qkv_does(local):
    result = run(
        "patch", "--model", local[0], "--text", TEXT, "--ablate", "1.2", "--format", "plain"
    )
    assert result.exit_code == 0, result.output
    assert "␣w" in result.output and "Ġ" not in result.output
    result = run(
        "patch", "--model", local[0], "--text", TEXT, "--ablate", "1.2", "--format", "json"
    )
    assert all(t.startswith(" w") for t, _ in json.loads(result.stdout)["before"])
