"""Long texts on the command line: --text-file (and - for stdin) wherever --text is taken,
--json beside the tables, summaries instead of L × L tables past 64 tokens (checked against
the eager weights of the same layer), qkv trace writing a file qkv.load reads, and what
``qkv bench --trace`` measures."""

from __future__ import annotations

import json

import numpy as np
import pytest

click_testing = pytest.importorskip("click.testing")
common = pytest.importorskip("qkv.cli.common")

import qkv  # noqa: E402
from qkv.cli.explain import explain  # noqa: E402
from qkv.cli.generate import generate  # noqa: E402
from qkv.cli.heads import heads  # noqa: E402
from qkv.cli.trace import trace  # noqa: E402
from qkv.explain.tokens import labels  # noqa: E402
from qkv.models import patterns  # noqa: E402

WORDS = "the bank raised its rates and the river bank flooded after the rain".split()
LONG = " ".join(WORDS[i % len(WORDS)] for i in range(150))  # MiniLM: 152 tokens with [CLS], [SEP]


@pytest.fixture
def runner(monkeypatch, minilm, smollm2):
    loaded = {"minilm-l6": minilm, "smollm2-135m": smollm2}
    monkeypatch.setattr(common, "load_model", loaded.__getitem__)  # the session's models
    return click_testing.CliRunner()


def eager_weights(minilm, text, layer):
    """The layer's weights by the eager path: every step kept, on the layer's own input x."""
    x = minilm.trace(text, layers=[layer]).layer(layer)["x"]
    return minilm.blocks[layer].attn(x, return_trace=True)[1]["weights"]  # (H, L, L)


def test_text_file_and_stdin_read_what_text_reads(runner, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("The cat sat on the mat.\n", encoding="utf-8")  # the final newline is dropped
    outputs = [
        runner.invoke(heads, ["--text", "The cat sat on the mat.", "--json"]),
        runner.invoke(heads, ["--text-file", str(path), "--json"]),
        runner.invoke(heads, ["--text-file", "-", "--json"], input="The cat sat on the mat.\n"),
    ]
    assert all(r.exit_code == 0 for r in outputs), [r.output for r in outputs]
    assert outputs[0].stdout == outputs[1].stdout == outputs[2].stdout
    assert json.loads(outputs[0].stdout)["tokens"][:3] == ["[CLS]", "the", "cat"]


def test_text_file_errors_are_one_line(runner, tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("café".encode("latin-1"))
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * ((8 << 20) + 1))
    for args, message in [
        (["--text", "hi", "--text-file", str(bad)], "give --text or --text-file, not both"),
        (["--text-file", str(bad)], f"--text-file {bad}: not UTF-8 text (byte 3)"),
        (["--text-file", str(big)], f"--text-file {big}: more than 8 MB of text"),
        (["--text-file", str(tmp_path / "none.txt")], "cannot open"),
    ]:
        res = runner.invoke(heads, args)
        assert res.exit_code == 2 and res.output.startswith("Error: ") and message in res.output


def test_heads_on_a_long_text_names_the_patterns_the_eager_weights_show(runner, minilm, tmp_path):
    path = tmp_path / "long.txt"
    path.write_text(LONG)
    res = runner.invoke(heads, ["--text-file", str(path), "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert len(got["tokens"]) == 152 and len(got["layers"]) == 6
    for layer in (0, 5):
        want = [patterns.label(W) for W in eager_weights(minilm, LONG, layer)]
        cells = got["layers"][layer]
        assert [c["pattern"] for c in cells] == [name for name, _ in want]
        np.testing.assert_allclose([c["weight"] for c in cells], [w for _, w in want], atol=1e-6)
    table = runner.invoke(heads, ["--text-file", str(path)])
    assert (
        table.exit_code == 0 and "152 tokens" in table.output and "… (152 tokens)" in table.output
    )


def test_heads_png_of_a_long_text_is_pooled(runner, tmp_path):
    path, png = tmp_path / "long.txt", tmp_path / "heads.png"
    path.write_text(LONG)
    res = runner.invoke(heads, ["--text-file", str(path), "--png", str(png)])
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_explain_on_a_long_text_prints_the_querys_top_keys_not_a_table(runner, minilm, tmp_path):
    path = tmp_path / "long.txt"
    path.write_text(LONG)
    args = ["--model", "minilm-l6", "--text-file", str(path), "--layer", "2", "--head", "3"]
    res = runner.invoke(explain, [*args, "--select", "40", "--format", "plain"])
    assert res.exit_code == 0, res.output
    W = eager_weights(minilm, LONG, 2)[3, 40]  # (L,)
    names = labels(minilm.tokenize(LONG), 152)
    order = sorted(range(152), key=lambda j: (-W[j], j))[:10]
    lines = res.output.splitlines()
    start = next(n for n, line in enumerate(lines) if "rank" in line) + 1
    rows = [line.split() for line in lines[start : start + 10]]
    assert [r[1] for r in rows] == [names[j] for j in order]
    assert [float(r[2]) for r in rows] == [round(float(W[j]), 4) for j in order]
    assert len(lines) < 40  # never a row per token
    data = json.loads(runner.invoke(explain, [*args, "--select", "40", "--json"]).stdout)
    assert [k["position"] for k in data["top_keys"]] == order
    assert len(data["heads"]) == 12 and data["query"]["position"] == 40
    res = runner.invoke(explain, [*args, "--png", str(tmp_path / "w.png")])
    assert res.exit_code == 2 and "'qkv heads --png' draws long texts pooled" in res.output


def test_trace_writes_a_file_that_loads_back(runner, minilm, tmp_path):
    out = tmp_path / "run.qkvtrace"
    args = ["--model", "minilm-l6", "--text", LONG, "--layer", "1", "-o", str(out), "--json"]
    res = runner.invoke(trace, args)
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["tokens"] == 152 and report["layers"] == [1]
    assert report["bytes"] == out.stat().st_size
    run = qkv.load(out)
    want = minilm.trace(LONG, layers=[1]).layer(1)
    for name in ("q", "weights", "z", "out"):
        np.testing.assert_array_equal(run.layer(1)[name], want[name])
    res = runner.invoke(
        trace, ["--model", "minilm-l6", "--text", "hi", "--layer", "9", "-o", str(out)]
    )
    assert res.exit_code == 2 and "--layer must be in [0, 6) for minilm-l6, got [9]" in res.output


def test_generate_reads_its_prompt_from_a_file(runner, reference, tmp_path):
    path = tmp_path / "prompt.txt"
    path.write_text(str(reference["smollm2/greedy/prompt"]) + "\n")
    res = runner.invoke(generate, ["--text-file", str(path), "--raw", "--max-new-tokens", "2"])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(" Paris")


def test_bench_trace_measures_what_the_trace_holds(smollm2):
    from qkv.bench.trace import measure, text_of

    assert len(smollm2.encode(text_of(smollm2, 300))[0]) == 300
    row = measure(smollm2, 16)
    # per token and layer: x and out (576 each), q, k, v after RoPE and before (960 + 768);
    # and the last hidden states (576 per token)
    assert row["held_bytes"] == 16 * 30 * (576 + 576 + 960 + 768) * 4 + 16 * 576 * 4
    assert row["xqkvo_bytes"] == 16 * 30 * (576 + 576 + 576 + 192 + 192) * 4
    assert row["peak_growth_bytes"] >= row["held_bytes"] and row["head_read_ms"]["reads"] == 5
