"""`qkv softmax`: the refresher, checked against hand-computed values."""

import json
import math

import pytest
from click.testing import CliRunner

from qkv.cli import main


def run(*args):
    return CliRunner().invoke(main, ["softmax", *args])


def test_2_1_0_prints_the_tutorial_probabilities():
    result = run("2", "1", "0", "--format", "plain")
    assert result.exit_code == 0, result.output
    # e^2/(e^2+e+1), e/(…), 1/(…) = 0.665, 0.245, 0.090
    assert "softmax(2, 1, 0) ≈ [0.67, 0.24, 0.09]" in result.output
    assert "7.389 + 2.718 + 1 = 11.11" in result.output  # each e^x and their sum
    assert "sum to 1.000" in result.output


def test_temperature_divides_first():
    result = run("2", "1", "0", "-t", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    e = [math.exp(1.0), math.exp(0.5), 1.0]  # e^(x/2)
    assert got["probabilities"] == pytest.approx([v / sum(e) for v in e], abs=1e-12)
    assert got["sum"] == pytest.approx(sum(e))
    assert sum(got["probabilities"]) == pytest.approx(1.0)


def test_negative_scores_are_numbers_not_options():
    result = run("-1", "0", "1", "--format", "plain")
    assert result.exit_code == 0, result.output
    total = math.exp(-1) + 1 + math.e
    assert f"[{math.exp(-1) / total:.2f}, {1 / total:.2f}, {math.e / total:.2f}]" in result.output


def test_huge_scores_do_not_overflow():
    result = run("1000", "0", "--format", "json")
    got = json.loads(result.stdout)
    assert got["probabilities"] == pytest.approx([1.0, 0.0])
    assert all(math.isfinite(v) for v in got["exp"])


def test_very_negative_scores_keep_their_exponentials_visible():
    result = run("-1000", "-1001", "--format", "plain")
    assert "e^(x/τ + 1000.00)" in result.output
    assert f"1 + {math.exp(-1):.4g} = {1 + math.exp(-1):.4g}" in result.output
    assert (
        f"[{1 / (1 + math.exp(-1)):.2f}, {math.exp(-1) / (1 + math.exp(-1)):.2f}]" in result.output
    )


def test_rich_output_has_no_colour_codes_when_piped():
    result = run("2", "1", "0")
    assert result.exit_code == 0
    assert "\x1b[" not in result.output
    assert "0.67" in result.output and "0.24" in result.output and "0.09" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (("2", "1", "-t", "0"), "--temperature must be a finite number > 0, got 0.0"),
        (("2", "1", "-t", "-1"), "--temperature must be a finite number > 0, got -1.0"),
        (("2", "inf"), "each score must be a finite number, got inf"),
        (
            ("2", "1", "-t", "1e-310"),
            "--temperature 1e-310 is too small for these scores: x/τ "
            "overflows float64 (largest |x/τ| must stay below 1.8e308)",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: {message}"


def test_no_scores_exits_2():
    result = run()
    assert result.exit_code == 2
    assert "Missing argument" in result.output
