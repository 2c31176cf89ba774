"""`qkv explain`: the printed numbers against a float64 reference written here, and the errors."""

import json
import math
import re
import struct
import warnings

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
    for line in lines[start + 1 :]:
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
    terms = " + ".join(f"{a:.2f}×{b:.2f}" for a, b in zip(q, k, strict=False))
    assert f"q[sat]·k[sat] = {terms} = {q @ k:.2f}" in out
    assert "softmax(mask(QKᵀ/√d_k/τ))·V with Q (6×3), K (6×3), V (6×3)" in out


def test_temperature_and_select_by_text_or_index():
    scene = presets.load("cat-sat")
    w, _ = reference(scene, tau=0.5)
    for sel in ("mat", "5"):
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
    printed = [line.split()[-1] for line in body[header + 1 : header + 1 + len(scene.tokens)]]
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


def test_markdown_renders_as_markdown():
    """Rendered by an independent CommonMark parser: prose is text, arithmetic is code, tables
    are tables, and tokens such as ___ stay literal (no emphasis, no stray backslashes)."""
    from markdown_it import MarkdownIt

    result = run("--preset", "agreement", "--format", "markdown")
    assert result.exit_code == 0
    out = result.stdout
    assert "## 1. input vectors X (8×4, one row per token)" in out
    html = MarkdownIt("commonmark").enable("table").render(out)
    assert "<em>" not in html and "<strong>" not in html and "\\" not in html
    assert html.count("<h2>") == 7  # the intro, steps 1-5, formula
    cells = re.sub(r' style="[^"]*"', "", html).replace("\n", "")
    assert "<td>___</td><td>0.00</td><td>0.00</td><td>0.00</td><td>1.00</td>" in cells
    assert "<th></th><th>x[0]</th><th>x[1]</th>" in cells
    # prose is paragraphs of plain text, not code
    assert "<p>selected query: ___ (position 7)</p>" in html
    assert "<p>___ attends most to he (weight 0.939)</p>" in html
    # worked arithmetic is one code block per run of lines, kept verbatim
    assert (
        '<pre><code class="language-text">  q[___]·k[he] = 3.00×2.00 + 1.00×1.00 = 7.00\n'
        "</code></pre>"
    ) in html
    assert "sum of weights = 1.000\nentropy" in html
    assert "<code>" not in html.replace('<code class="language-text">', "")


def test_rich_format_prints_tables_without_colour_codes_when_piped():
    result = run("--preset", "two-token", "--no-scale")
    assert result.exit_code == 0
    assert "\x1b[" not in result.output
    assert "z[subject] = [0.54, 2.19]" in result.output
    assert row(section(result.output, "4."), "verb")[-1] == "0.731"


def test_select_token_at_position_as_the_rows_are_labelled():
    scene = presets.load("cat-sat")
    w, _ = reference(scene)
    for sel, i in (("the@4", 4), ("the@0", 0), ("cat@1", 1), ("the", 0)):
        out = plain("--select", sel)
        assert f"query: {['the@0', 'cat', 'sat', 'on', 'the@4', 'mat'][i]} (position {i})" in out
        printed = [row(section(out, "4."), t)[-1] for t in ("the@0", "sat", "the@4")]
        assert printed == [f"{w[i, j]:.3f}" for j in (0, 2, 4)]
    result = run("--select", "the@3")
    assert result.exit_code == 2
    assert result.output.strip() == (
        "Error: 'the@3': position 3 holds 'on', not 'the'; choose one "
        "of ['the@0', 'cat', 'sat', 'on', 'the@4', 'mat']"
    )
    result = run("--select", "mat@9")
    assert result.exit_code == 2
    assert result.output.strip() == (
        "Error: 'mat@9': position 9 is past the last token; positions run 0-5"
    )


@pytest.mark.parametrize("preset", ["cat-sat", "two-heads"])
@pytest.mark.parametrize("index", ["-1", "-6", "-7"])
def test_a_negative_index_is_refused_as_the_range_says(preset, index):
    result = run("--preset", preset, "--select", index)
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"Error: --select: a token index must be ≥ 0 (positions run from 0), got {index}"
    )
    assert "query: mat (position 5)" in plain("--select", "5")  # the last one, counted from 0


def test_a_huge_alibi_slope_is_one_line_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning raised here would be a traceback
        result = run("--alibi", "1e308")
    assert result.exit_code == 2
    assert result.output.strip() == (
        "Error: ALiBi slope 1e+308 × the largest distance 5 overflows float64; "
        "use a slope ≤ 3.6e+307"
    )


def test_the_highest_score_written_out_is_among_the_visible_keys():
    scene = presets.load("cat-sat")
    q, k = scene.x @ scene.W_Q, scene.x @ scene.W_K  # (6, 3)
    scores = q[1] @ k.T  # (6,) for the query 'cat'
    assert int(np.argmax(scores)) == 2  # 'sat' scores highest, but the causal mask hides it
    out = plain("--select", "cat", "--causal")
    terms = " + ".join(f"{a:.2f}×{b:.2f}" for a, b in zip(q[1], k[1], strict=False))
    assert "term by term, the highest one among the keys it may see:" in out
    assert f"q[cat]·k[cat] = {terms} = {scores[1]:.2f}" in out
    assert "q[cat]·k[sat]" not in out
    assert "q[cat]·k[sat]" in plain("--select", "cat")  # unmasked, 'sat' is the one


SUM = re.compile(r"^(z\[\d+\]|q\[.+?\]\[\d+\]|q\[.+?\]·k\[.+?\]) = (.+) ([=≈]) (-?\d+\.\d\d)$")


def shown_sum(lhs: str, terms: str) -> float:
    """What the terms printed on a line add up to, read back from the text."""
    parts = [t.strip("()") for t in terms.split(" + ")]
    if lhs.startswith("z"):
        return sum(float(t) for t in parts)
    return sum(float(a) * float(b.strip("()")) for a, b in (t.split("×") for t in parts))


@pytest.mark.parametrize("name", presets.names())
def test_rounded_terms_add_up_to_the_total_shown_or_say_so(name):
    scene = presets.load(name)
    checked = approximate = 0
    for causal in (False, True):
        for i in range(len(scene.tokens)):
            out = plain("--preset", name, "--select", str(i), *(["--causal"] if causal else []))
            for line in out.splitlines():
                m = SUM.match(line.strip())
                if not m or "…" in line:
                    continue
                lhs, terms, sign, total = m.groups()
                adds_up = f"{shown_sum(lhs, terms) + 0.0:.2f}".replace("-0.00", "0.00") == total
                assert sign == ("=" if adds_up else "≈"), line
                checked += 1
                approximate += sign == "≈"
            if "≈" in out:
                assert "≈: the terms are shown rounded" in out
            weights = section(out, "4.")
            header = next(n for n, line in enumerate(weights) if line.startswith("key"))
            body = [line.split() for line in weights[header + 1 : header + 1 + len(scene.tokens)]]
            for col, what, line_start in (
                (-1, "weights", "sum of weights = "),
                (-2, "e^ values", "weight = e^(masked"),
            ):
                line = next((x for x in weights if x.startswith(line_start)), None)
                if line is None:  # a fully masked row has no sum
                    continue
                total = re.search(r"(?:= |÷ )(\d+\.\d{3})(?: |$)", line).group(1)
                shown = f"{sum(float(r[col]) for r in body):.3f}"
                if shown != total:
                    assert (
                        f"(the {what} shown are rounded to 3 decimals: they add up to "
                        f"{shown})" in line
                    )
    assert checked >= 4 * len(scene.tokens)
    if name == "cat-sat":
        assert approximate > 0  # z[1] of 'sat' prints terms adding to 0.59 beside z = 0.58


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

    red, grey = (0xD6, 0x27, 0x28), (0xD0, 0xD0, 0xD0)
    assert count(causal, red) > 500 and count(full, red) > 500  # the selected row's outline
    assert count(causal, grey) > 20 * count(full, grey) + 5000  # masked cells are grey


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("--preset", "nope"),
            "unknown preset 'nope'; choose one of ['cat-sat', 'agreement', "
            "'bank', 'two-token', 'two-heads']",
        ),
        (
            ("--select", "dog"),
            "token 'dog' is not in scene 'cat-sat'; choose one of ['the', 'cat', "
            "'sat', 'on', 'the', 'mat'] or an index 0-5",
        ),
        (("--select", "6"), "token index must be in [0, 6) for scene 'cat-sat', got 6"),
        (("-t", "0"), "--temperature must be a finite number > 0, got 0.0"),
        (("-t", "-2"), "--temperature must be a finite number > 0, got -2.0"),
        (
            ("-t", "1e-310"),
            "temperature 1e-310 is too small for these scores: scaled ÷ τ "
            "overflows float64 (largest |scaled| = 2.10895); use τ ≥ 1.17e-308",
        ),
        (("--head", "1"), "--head must be one of [0]: scene 'cat-sat' has a single head, got 1"),
        (
            ("--preset", "two-heads", "--head", "2"),
            "--head must be one of [0, 1]: scene 'two-heads' has 2 heads, got 2",
        ),
        (
            ("--preset", "two-heads", "--no-scale"),
            "scene 'two-heads' is multi-head; it always scales by 1/√d_head",
        ),
    ],
)
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


def test_softcap_sink_and_alibi_show_their_steps_with_the_engines_numbers():
    import numpy as np
    from click.testing import CliRunner

    import qkv
    from qkv.cli import main
    from qkv.explain.numbers import fmt

    args = [
        "explain",
        "--preset",
        "cat-sat",
        "--select",
        "sat",
        "--causal",
        "--softcap",
        "1",
        "--sink",
        "0",
        "--alibi",
        "0.5",
    ]
    result = CliRunner().invoke(main, [*args, "--format", "plain"])
    assert result.exit_code == 0, result.output
    assert (
        "4. scaled → tempered → capped → biased → masked → weights (softmax with a sink)"
        in result.output
    )
    scene = qkv.presets.load("cat-sat")
    q, k = scene.x @ scene.W_Q, scene.x @ scene.W_K
    s = q[2] @ k.T / np.sqrt(q.shape[1])  # row "sat", float64 by hand
    capped = np.tanh(s)
    biased = capped - 0.5 * np.abs(2 - np.arange(len(s)))
    e = np.exp(np.append(biased[:3], 0.0) - max(biased[:3].max(), 0.0))
    sink = e[-1] / e.sum()
    (row,) = [ln for ln in result.output.splitlines() if ln.strip().startswith("sink ")]
    assert row.split()[-1] == fmt(sink, 3)
    trace = qkv.Trace.from_json(CliRunner().invoke(main, [*args, "--format", "json"]).stdout)
    np.testing.assert_allclose(trace["capped"][2], capped, rtol=1e-12)
    np.testing.assert_allclose(trace["sink"][2, 0], sink, rtol=1e-12)
