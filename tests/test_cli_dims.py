"""`qkv dims`: the tutorials' exercises through the command line, and its errors."""

import json

import pytest
from click.testing import CliRunner

from qkv.cli import main


def run(*args):
    return CliRunner().invoke(main, ["dims", *args])


def plain(*args) -> str:
    result = run(*args, "--format", "plain")
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize(
    "args, line",
    [
        (("--model", "andrea-12m"), "d_head = d_model / n_heads = 384 / 12 = 32"),
        (("--model", "andrea-120m"), "d_head = d_model / n_heads = 768 / 12 = 64"),
        (("--model", "andrea-480m"), "d_head = d_model / n_heads = 1536 / 24 = 64"),
        (("--model", "andrea-2b"), "d_head = d_model / n_heads = 4096 / 32 = 128"),
        (("--model", "andrea-2b"), "√d_head = √128 = 11.31"),
        (("--model", "andrea-120m"), "scores  1,024 × 1,024 = 1,048,576  12,582,912"),
        (("--model", "mini-gpt"), "W_Q + W_K + W_V = 12,288; W_O = 4,096"),
        (("--model", "mini-gpt"), "total  16,384"),
        (("--d-model", "64", "--n-heads", "4"), "total  16,384"),
        (("--model", "smollm2-135m"), "bfloat16: 23,040 B (22.50 KiB) per token"),
    ],
)
def test_tutorial_numbers(args, line):
    out = [" ".join(l.split()) for l in plain(*args).splitlines()]
    assert any(" ".join(line.split()) in l for l in out), out


def test_sizes_options_and_overrides():
    out = plain(
        "--d-model",
        "576",
        "--n-heads",
        "9",
        "--n-kv-heads",
        "3",
        "--layers",
        "30",
        "--context",
        "2048",
    )
    assert "grouped-query attention: 3 K/V heads, each shared by 3 query heads" in out
    assert "scores at context T = 2,048" in out
    got = json.loads(run("--model", "gpt2-small", "--context", "256", "--format", "json").stdout)
    assert got["context"] == 256 and got["layers"] == 12
    assert got["parameters"]["b_O"] == 768 and got["params_per_layer"] == 2_362_368
    assert got["scores_per_head"] == 256**2
    biased = run("--d-model", "8", "--n-heads", "2", "--bias", "--format", "json")
    biased = json.loads(biased.stdout)
    assert biased["parameters"] == {
        "W_Q": 64,
        "W_K": 64,
        "W_V": 64,
        "W_O": 64,
        "b_Q": 8,
        "b_K": 8,
        "b_V": 8,
        "b_O": 8,
    }


def test_markdown_and_rich():
    md = run("--model", "mini-gpt", "--format", "markdown").stdout
    assert "| W\\_O | 64 × 64 | 4,096 |" in md
    rich = run("--model", "mini-gpt")
    assert rich.exit_code == 0 and "\x1b[" not in rich.output and "16,384" in rich.output


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("--d-model", "100", "--n-heads", "12"),
            "d_model must be divisible by n_heads, got d_model=100, n_heads=12 (d_model / n_heads = "
            "8.333)",
        ),
        (("--d-model", "0", "--n-heads", "4"), "d_model must be a positive integer, got 0"),
        (("--d-model", "-64", "--n-heads", "4"), "d_model must be a positive integer, got -64"),
        (
            ("--d-model", "64", "--n-heads", "4", "--n-kv-heads", "3"),
            "n_heads must be divisible by n_kv_heads, got n_heads=4, n_kv_heads=3",
        ),
        (
            (
                "--d-model",
                "64",
            ),
            "give --d-model and --n-heads, or --model NAME (one of ['andrea-12m', "
            "'andrea-120m', 'andrea-480m', 'andrea-2b', 'mini-gpt', 'gpt2-small', "
            "'minilm-l6', 'smollm2-135m']); missing --n-heads",
        ),
        (
            ("--model", "gpt5"),
            "unknown model 'gpt5'; choose one of ['andrea-12m', 'andrea-120m', "
            "'andrea-480m', 'andrea-2b', 'mini-gpt', 'gpt2-small', 'minilm-l6', "
            "'smollm2-135m']",
        ),
        (
            ("--model", "mini-gpt", "--n-heads", "2"),
            "--model mini-gpt sets the sizes itself; drop --n-heads (only --context and --layers may "
            "be changed)",
        ),
        (("--model", "mini-gpt", "--layers", "0"), "layers must be a positive integer, got 0"),
    ],
)
def test_errors_exit_2_with_one_line(args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: {message}"


@pytest.mark.parametrize(
    "option", ["--d-model", "--n-heads", "--n-kv-heads", "--context", "--layers"]
)
@pytest.mark.parametrize(
    "value, got",
    [
        (str(10**400), "a number of 401 digits"),
        ("-" + str(10**400), "a negative number of 401 digits"),
        ("1" * 5000, "a number of 5,000 digits"),  # past Python's int-to-text limit
        (str(2**53 + 1), "9,007,199,254,740,993"),
    ],
)
def test_a_size_past_2_53_is_one_line(option, value, got):
    sizes = {"--d-model": "64", "--n-heads": "4", option: value}
    result = run(*[x for pair in sizes.items() for x in pair])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"Error: {option} must be a whole number from 1 to 2**53 = 9,007,199,254,740,992, got {got}"
    )


def test_sizes_of_2_53_are_reported_exactly():
    n = 2**53  # d_head = 1; every count is an exact integer, its GiB a finite float
    sizes = ["--d-model", "--n-heads", "--context", "--layers"]
    got = run(*[x for option in sizes for x in (option, str(n))], "--format", "json")
    assert got.exit_code == 0, got.output
    report = json.loads(got.stdout)
    assert report["d_head"] == 1 and report["scores_per_layer"] == n**3
    assert report["params_all_layers"] == 4 * n * n * n  # W_Q, W_K, W_V, W_O: n × n each, n layers
