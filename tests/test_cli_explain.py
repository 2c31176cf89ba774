"""`qkv explain`: the printed numbers against a float64 reference written here, and the errors."""

import json
import math
import struct

import numpy as np
import pytest
from click.testing import CliRunner

import qkv
from qkv import presets
from qkv.cli import main


def run(*args):
    return CliRunner().invoke(main, ["explain", *args])


def plain(*args) -> str:
    result = run(*args, "--format", "plain")
    assert result.exit_code == 0, result.output
    return result.stdout


def section(text: str, title_start: str) -> list[str]:
    """The body lines of the section whose title starts with title_start."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(title_start))
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        body.append(line.strip())
    return body


def row(lines: list[str], label: str) -> list[str]:
    return next(line.split() for line in lines if line.split()[:1] == [label])


def reference(scene, *, tau=1.0, scaled=True, causal=False, head=None):
    """Single- or one-head attention in plain float64 NumPy, independent of qkv's engine."""
    pick = (lambda W: W) if head is None else (lambda W: W[head])
    q, k, v = (scene.x @ pick(W) for W in (scene.W_Q, scene.W_K, scene.W_V))
    s = q @ k.T / (math.sqrt(q.shape[1]) if scaled else 1.0) / tau
    if causal:
        s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    return w, w @ v


def test_two_token_unscaled_prints_0_54_and_2_19():
    out = plain("--preset", "two-token", "--no-scale")
    assert "z[subject] = [0.54, 2.19]" in out
    assert "z[0] = 0.54 + 0.00 = 0.54" in out and "z[1] = 0.00 + 2.19 = 2.19" in out
    weights = section(out, "4.")
    assert row(weights, "subject")[-1] == f"{1 / (1 + math.e):.3f}"  # 0.269
    assert row(weights, "verb")[-1] == f"{math.e / (1 + math.e):.3f}"  # 0.731
    assert "scaling is off" in out


def test_default_scene_numbers_match_a_float64_reference():
    scene = presets.load("cat-sat")
    w, z = reference(scene)
    out = plain()
    assert out.startswith("cat-sat: the cat sat on the mat")
    i = scene.select  # "sat"
    table = section(out, "4.")
    for j, label in enumerate(["the@0", "cat", "sat", "on", "the@4", "mat"]):
        assert row(table, label)[-1] == f"{w[i, j]:.3f}"
    assert f"z[sat] = [{', '.join(f'{e:.2f}' for e in z[i])}]" in out
    assert "score ÷ √d_k = score ÷ √3 = score ÷ 1.732" in out
    assert "sum of weights = 1.000" in out
    ent = -(w[i] * np.log(w[i])).sum()
    assert f"exp(entropy) = {math.exp(ent):.2f} of 6" in out
    # one dot product term by term: q[sat]·k[sat], the highest score
    q, k = scene.x[i] @ scene.W_Q, scene.x[i] @ scene.W_K
    terms = " + ".join(f"{a:.2f}×{b:.2f}" for a, b in zip(q, k))
    assert f"q[sat]·k[sat] = {terms} = {q @ k:.2f}" in out
    assert "softmax(mask(QKᵀ/√d_k/τ))·V with Q (6×3), K (6×3), V (6×3)" in out


def test_temperature_and_select_by_text_or_index():
    scene = presets.load("cat-sat")
    w, _ = reference(scene, tau=0.5)
    for sel in ("mat", "5", "-1"):
        out = plain("--select", sel, "-t", "0.5")
        table = section(out, "4.")
        assert [row(table, t)[-1] for t in ("cat", "mat")] == [f"{w[5, 1]:.3f}", f"{w[5, 5]:.3f}"]
        assert "scaled ÷ 0.500 (τ < 1 sharpens the weights)" in out


def test_causal_names_the_hidden_keys_and_zeroes_them():
    scene = presets.load("bank")
    w, z = reference(scene, causal=True)
    out = plain("--preset", "bank", "--causal")
    assert "masked: to@5, deposit, money set to -inf (causal" in out
    table = section(out, "4.")
    assert row(table, "deposit")[4:] == ["-inf", "0.000", "0.000"]
    assert row(table, "went")[-1] == f"{w[4, 1]:.3f}"
    assert f"of {5}" in out  # 5 keys are visible to 'bank'
    assert f"z[bank] = [{z[4, 0]:.2f}, {z[4, 1]:.2f}]" in out


def test_multi_head_scene_shows_each_head_and_the_sum():
    scene = presets.load("two-heads")
    out = plain("--preset", "two-heads", "--head", "1")
    w1, z1 = reference(scene, head=1)
    _, z0 = reference(scene, head=0)
    assert "2. projections: query, keys and values (head 1)" in out
    assert row(section(out, "4."), "mat")[-1] == f"{w1[2, 5]:.3f}"
    total = z0[2] @ scene.W_O[0] + z1[2] @ scene.W_O[1] + scene.b_O  # (d_model,)
    assert f"out[sat] = [{', '.join(f'{e:.2f}' for e in total)}]" in out
    assert f"head 1: z = [{', '.join(f'{e:.2f}' for e in z1[2])}]" in out


@pytest.mark.parametrize("name", presets.names())
@pytest.mark.parametrize("causal", [False, True])
def test_every_scene_prints_the_engines_weights(name, causal):
    scene = presets.load(name)
    trace = scene.trace(causal=causal)
    w = trace["weights"][..., 0, :, :] if scene.n_heads else trace["weights"]  # (L, S)
    out = plain("--preset", name, *(["--causal"] if causal else []))
    body = section(out, "4.")
    header = next(n for n, line in enumerate(body) if line.startswith("key"))
    printed = [line.split()[-1] for line in body[header + 1:header + 1 + len(scene.tokens)]]
    assert printed == [f"{e:.3f}" for e in w[scene.select]]
    assert "sum of weights = 1.000" in out


def test_json_round_trips_through_trace_from_json():
    result = run("--preset", "bank", "--causal", "--format", "json")
    assert result.exit_code == 0
    trace = qkv.Trace.from_json(result.stdout)
    expected = presets.load("bank").trace(causal=True)
    assert trace.names == expected.names
    for name in expected.names:
        np.testing.assert_array_equal(trace[name], expected[name])
    w, _ = reference(presets.load("bank"), causal=True)
    np.testing.assert_allclose(trace["weights"], w, rtol=1e-12, atol=1e-15)
    assert trace.tokens == list(presets.load("bank").tokens)
    assert trace.settings["causal"] == "bottom-right"


def test_markdown_has_headings_and_pipe_tables():
    result = run("--preset", "agreement", "--format", "markdown")
    assert result.exit_code == 0
    out = result.stdout
    assert "## 1. input vectors X (8×4, one row per token)" in out
    assert "| `___` | `0.00` | `0.00` | `0.00` | `1.00` |" in out  # the blank kept literal
    assert "|:---|---:|---:|---:|---:|" in out


def test_rich_format_prints_tables_without_colour_codes_when_piped():
    result = run("--preset", "two-token", "--no-scale")
    assert result.exit_code == 0
    assert "\x1b[" not in result.output
    assert "z[subject] = [0.54, 2.19]" in result.output
    assert row(section(result.output, "4."), "verb")[-1] == "0.731"


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_png_heatmap_has_the_expected_size_outline_and_masked_cells(tmp_path):
    pytest.importorskip("matplotlib", reason="--png needs the plot extra (matplotlib)")
    import matplotlib.image

    causal, full = tmp_path / "causal.png", tmp_path / "full.png"
    result = run("--preset", "bank", "--causal", "--png", str(causal), "--format", "json")
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # stdout stays pure JSON; the note goes to stderr
    assert f"wrote {causal} (800×600 px)" in result.stderr
    assert run("--preset", "bank", "--png", str(full)).exit_code == 0
    assert png_size(causal) == (800, 600) == png_size(full)

    def count(path, rgb):
        img = matplotlib.image.imread(path)[..., :3]  # (600, 800, 3) in [0, 1]
        return int((np.abs(img - np.array(rgb) / 255).max(axis=-1) < 0.02).sum())

    red, grey = (0xd6, 0x27, 0x28), (0xd0, 0xd0, 0xd0)
    assert count(causal, red) > 500 and count(full, red) > 500  # the selected row's outline
    assert count(causal, grey) > 20 * count(full, grey) + 5000  # masked cells are grey


@pytest.mark.parametrize("args, message", [
    (("--preset", "nope"), "unknown preset 'nope'; choose one of ['cat-sat', 'agreement', "
                           "'bank', 'two-token', 'two-heads']"),
    (("--select", "dog"), "token 'dog' is not in scene 'cat-sat'; choose one of ['the', 'cat', "
                          "'sat', 'on', 'the', 'mat'] or an index 0-5"),
    (("--select", "6"), "token index must be in [0, 6) for scene 'cat-sat', got 6"),
    (("-t", "0"), "--temperature must be a finite number > 0, got 0.0"),
    (("-t", "-2"), "--temperature must be a finite number > 0, got -2.0"),
    (("-t", "1e-310"), "temperature 1e-310 is too small for these scores: scaled ÷ τ "
                       "overflows float64 (largest |scaled| = 2.10895); use τ ≥ 1.17e-308"),
    (("--head", "1"), "--head must be one of [0]: scene 'cat-sat' has a single head, got 1"),
    (("--preset", "two-heads", "--head", "2"),
     "--head must be one of [0, 1]: scene 'two-heads' has 2 heads, got 2"),
    (("--preset", "two-heads", "--no-scale"),
     "scene 'two-heads' is multi-head; it always scales by 1/√d_head"),
])
def test_errors_exit_2_with_one_line(args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: {message}"


def test_png_into_a_missing_folder_exits_2(tmp_path):
    pytest.importorskip("matplotlib", reason="--png needs the plot extra (matplotlib)")
    result = run("--png", str(tmp_path / "no" / "such" / "w.png"))
    assert result.exit_code == 2
    assert result.output.strip().startswith("Error: cannot write the PNG to ")
    assert "No such file or directory" in result.output
