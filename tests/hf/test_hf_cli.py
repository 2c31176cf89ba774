"""`qkv patch` on a local transformers directory (a tiny Llama saved to disk): the numbers it
prints equal the model's own, and bad input gets one line and exit 2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from tiny import save_local

from qkv.cli import main  # noqa: E402

torch = pytest.importorskip("torch")
TEXT = "w5 w17 w33 w5 w17"


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama")
    return path, save_local("llama", path)


def patch(*args):
    return CliRunner().invoke(main, ["patch", *map(str, args)])


def test_patch_reports_the_models_own_next_token_distribution(local):
    path, model = local
    result = patch(
        "--model",
        path,
        "--text",
        TEXT,
        "--ablate",
        "1.2",
        "--tau",
        "0.1=0.5",
        "--top-k",
        3,
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    ids = torch.tensor([[5, 17, 33, 5, 17]])
    with torch.no_grad():
        p = torch.softmax(model(input_ids=ids).logits[0, -1].double(), -1)
    top = torch.topk(p, 3)
    assert [t for t, _ in got["before"]] == [f"w{i}" for i in top.indices.tolist()]
    assert [q for _, q in got["before"]] == pytest.approx(top.values.tolist(), abs=1e-6)
    assert got["edits"] == ["layer 1 head 2: zero-ablated", "layer 0 head 1: τ = 0.5"]
    assert got["kl"] > 0


def test_patch_prints_a_table(local):
    result = patch("--model", local[0], "--text", TEXT, "--pin", "0.0", "--format", "plain")
    assert result.exit_code == 0, result.output
    assert "layer 0 head 0: weights pinned uniform" in result.output
    assert "KL(before ‖ after) =" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--text", TEXT], "give at least one edit"),
        (["--text", TEXT, "--tau", "1.0"], "--tau takes LAYER.HEAD=VALUE"),
        (
            ["--text", TEXT, "--tau", "1.0=hot"],
            "--tau 1.0: τ must be a finite number > 0, got 'hot'",
        ),
        (["--text", TEXT, "--ablate", "a.b"], "--ablate takes LAYER.HEAD"),
        (["--text", TEXT, "--ablate", "7.0"], "layer must be in [0, 2)"),
        (["--text", TEXT, "--ablate", "1.0", "--ablate", "1.0"], "1.0 is given twice"),
        (["--text", " ", "--ablate", "1.0"], "--text must contain"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(local, args, message):
    result = patch("--model", local[0], *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_pickle_weights_need_the_explicit_flag(tmp_path):
    save_local("llama", tmp_path, safetensors=False)
    result = patch("--model", tmp_path, "--text", TEXT, "--ablate", "0.0")
    assert result.exit_code == 2 and "--allow-pickle" in result.output
    result = patch(
        "--model", tmp_path, "--text", TEXT, "--ablate", "0.0", "--allow-pickle", "--format", "json"
    )
    assert result.exit_code == 0, result.output


def test_a_model_that_is_neither_bundled_nor_a_directory_is_refused(tmp_path):
    result = patch("--model", tmp_path / "missing", "--text", TEXT, "--ablate", "0.0")
    assert result.exit_code == 2
    assert "a local transformers model directory holding config.json" in result.output


def test_heads_taxonomy_prints_the_grid_and_the_top_heads(monkeypatch, minilm):
    import numpy as np

    from qkv.cli import common
    from qkv.hf import taxonomy

    monkeypatch.setattr(common, "load_model", {"minilm-l6": minilm}.__getitem__)
    result = CliRunner().invoke(main, ["heads", "--model", "minilm-l6", "--taxonomy"])
    assert result.exit_code == 0, result.output
    s = taxonomy.measure(minilm)
    layer, head, score = s.top("previous", 1)[0]
    assert f"top previous-token heads: {layer}.{head} ({score:.2f})" in result.output
    assert (
        len([line for line in result.output.splitlines() if line.strip()[:1].isdigit()])
        == minilm.n_layers
    )
    assert np.isfinite(s.first).all()


def test_heads_without_text_or_taxonomy_is_one_line(monkeypatch, minilm):
    from qkv.cli import common

    monkeypatch.setattr(common, "load_model", {"minilm-l6": minilm}.__getitem__)
    result = CliRunner().invoke(main, ["heads", "--model", "minilm-l6"])
    assert result.exit_code == 2 and "--text or --text-file is required" in result.output
