"""Every `qkv` command, with --help and with bad arguments: help exits 0; a bad argument is one
line 'Error: …', exit status 2, and never a traceback, including when an optional package such as
torch is not installed (the message names the extra that installs it)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from qkv import cli
from qkv.cli import common

NO_DIR = "/nonexistent-qkv-dir/x.png"

# command (lab's sub-commands as "lab NAME") -> bad arguments and words the error line must hold
BAD = {
    "explain": [
        (["--checkpoint", ""], "expected a file path, got ''"),
        (["--png", ""], "expected a file path"),
        (["-t", "0"], "--temperature must be a finite number > 0"),
        (["-t", "abc"], "--temperature must be a finite number > 0, got 'abc'"),
        (["--png", NO_DIR], f"'{NO_DIR}': No such file or directory"),
        (["--select", "99"], "token index must be in [0, 6)"),
        (["--softcap", "0"], "--softcap must be a finite number > 0"),
        (["--sink", "inf"], "--sink must be a finite number"),
        (["--alibi", "-1"], "--alibi must be a finite number ≥ 0"),
        (["--alibi", "1e308"], "ALiBi slope 1e+308 × the largest distance 5 overflows float64"),
        (["--select", "-1"], "--select: a token index must be ≥ 0 (positions run from 0), got -1"),
        (
            ["--model", "smollm2-135m", "--text", "hi", "--sink", "0"],
            "--softcap, --sink and --alibi apply to presets",
        ),
    ],
    "export": [
        (["--preset", "nope", "-o", "x.html"], "'nope' is not one of"),
        (["--preset", "bank", "-o", ""], "expected a file path"),
        (
            ["--preset", "bank", "--temperature", "0", "-o", "x.html"],
            "--temperature must be a finite number > 0, got 0.0",
        ),
        (["--preset", "bank", "-o", NO_DIR.replace(".png", ".html")], "nonexistent-qkv-dir"),
    ],
    "patch": [
        (
            ["--model", "/nonexistent-qkv-dir", "--text", "hi", "--ablate", "1.1"],
            "a local transformers model directory",
        ),
        (["--text", "hi", "--tau", "1.1=0"], "--tau"),
        (["--text", "hi", "--tau", "1.1=nan"], "--tau 1.1: τ must be a finite number > 0, got nan"),
        (["--text", "hi", "--tau", "2=x"], "--tau 2: τ must be a finite number > 0, got 'x'"),
    ],
    "attribute": [
        (
            ["--model", "/nonexistent-qkv-dir", "--text", "hi", "--target", "x"],
            "a local transformers model directory",
        ),
        (["--text", " ", "--target", "x"], "--text must contain at least one non-space"),
        (["--text", "hi", "--target", "x", "--png", ""], "expected a file path"),
        (["--text", "hi", "--target", "x", "--top", "0"], "'--top'"),
    ],
    "dims": [(["--d-model", "7", "--n-heads", "2"], "divisible by n_heads")],
    "presets": [(["--format", "nope"], "'nope' is not one of")],
    "softmax": [
        (["nan"], "finite"),
        (["1", "-t", "-1"], "--temperature"),
        (["1", "abc"], "each score must be a finite number, got 'abc'"),
        (["1e400"], "each score must be a finite number, got inf"),
    ],
    "serve": [
        (["--port", "70000"], "--port"),
        (["--host", "no such host", "--port", "0"], "cannot listen on no such host"),
    ],
    "heads": [
        (["--text", "hi", "--png", NO_DIR], f"cannot open '{NO_DIR}'"),
        (["--text", "hi", "--png", ""], "expected a file path"),
    ],
    "generate": [
        (["--prompt", "hi", "--seed", "-1"], "'--seed': -1 is not in the range"),
        (
            ["--prompt", "hi", "--temperature", "nan"],
            "Error: --temperature must be a finite number",
        ),
        (
            ["--prompt", "hi", "--temperature", "inf"],
            "Error: --temperature must be a finite number",
        ),
        (
            ["--prompt", "hi", "--temperature", "-1"],
            "--temperature must be a finite number ≥ 0 (0 = greedy), got -1.0",
        ),
    ],
    "lab": [(["nope"], "No such command 'nope'")],
    "lab scaling": [(["--seed", "-1"], "'--seed': -1 is not in the range")],
    "lab symmetry": [(["--seed", str(2**40)], "'--seed'")],
    "lab temperature": [(["--png", ""], "expected a file path")],
    "lab cost": [(["--format", "xml"], "'xml' is not one of")],
    "lab train": [
        (["--seed", "-1"], "'--seed': -1 is not in the range"),
        (["--steps", "0"], "'--steps'"),
        (["--out", ""], "expected a file path"),
        (["--per-group", "0"], "'--per-group'"),
        (["--dump-corpus", ""], "expected a file path"),
    ],
    "quiz": [(["--kind", "nope"], "--kind must be one of"), (["--n", "0"], "'--n'")],
    "ring": [
        (["--timeout", "nan"], "--timeout must be a finite number > 0"),
        (["--timeout", "0"], "--timeout must be a finite number > 0, got 0.0"),
        (["-n", "0"], "'--world-size'"),
        (["--dtype", "float16"], "'float16'"),
    ],
    "bench": [
        (["--T", "abc"], "--T: expected comma-separated integers"),
        (["--min-time", "nan"], "--min-time must be a finite number ≥ 0, got nan"),
        (["--max-memory", "-1"], "--max-memory must be a finite number ≥ 0, got -1.0"),
        (["--trace", "0"], "--trace 0: expected positive token counts, got [0]"),
        (["--trace", "2k"], "--trace: expected comma-separated token counts, got '2k'"),
    ],
    "trace": [
        (["-o", "x.qkvtrace"], "give the text with --text or --text-file"),
        (["--text", "hi", "--text-file", "-", "-o", "x.qkvtrace"], "not both"),
        (["--text", "hi", "-o", ""], "expected a file path"),
        (["--text-file", "/nonexistent-qkv-dir/t.txt", "-o", "x"], "cannot open"),
    ],
}


def every_command() -> list[str]:
    names = []
    for name in sorted(cli.COMMANDS):
        names.append(name)
        command = cli.main.get_command(click.Context(cli.main), name)
        if isinstance(command, click.Group):
            names += [f"{name} {sub}" for sub in sorted(command.commands)]
    return names


def assert_one_error_line(result, words: str):
    out = result.output
    assert result.exit_code == 2, out
    assert "Traceback" not in out and isinstance(result.exception, SystemExit), out
    errors = [line for line in out.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and words in errors[0], out


def test_every_command_has_bad_argument_cases():
    assert sorted(BAD) == every_command()


@pytest.mark.parametrize("name", every_command())
def test_help_exits_0(name):
    result = CliRunner().invoke(cli.main, [*name.split(), "--help"])
    assert result.exit_code == 0 and f"Usage: qkv {name}" in result.output, result.output


@pytest.fixture
def loaded_models(monkeypatch, minilm):
    monkeypatch.setattr(common, "load_model", {"minilm-l6": minilm}.__getitem__)


@pytest.mark.parametrize(
    "name, args, words", [(n, a, w) for n, cases in BAD.items() for a, w in cases]
)
def test_a_bad_argument_is_one_error_line_and_status_2(name, args, words, request):
    if name == "heads":
        request.getfixturevalue("loaded_models")
    result = CliRunner().invoke(cli.main, [*name.split(), *args])
    assert_one_error_line(result, words)


def test_a_quiz_answer_that_is_not_an_answer_counts_as_wrong():
    result = CliRunner().invoke(
        cli.main,
        ["quiz", "--kind", "masks/hidden", "--n", "2", "--seed", "1", "--answers", ",;[,]"],
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("not an answer: expected key positions") == 2
    assert "score: 0/2" in result.output


def qkv(*args: str, block: str | None = None) -> subprocess.CompletedProcess:
    """`qkv ARGS` in a fresh interpreter; ``block`` names a package made unimportable."""
    code = "import sys\n"
    if block:  # an import finder that answers as Python does when the package is not installed
        code += (
            "class Absent:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.split('.')[0] == {block!r}:\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Absent())\n"
        )
    code += "from qkv.cli import main\nmain(sys.argv[1:], prog_name='qkv')\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )


def test_a_real_process_prints_one_line_on_stderr():
    done = qkv("lab", "train", "--seed", "-1")
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: Invalid value for '--seed': -1 is not in the range 0<=x<=4294967295."
    )


@pytest.mark.parametrize(
    "args",
    [
        ["lab", "train", "--steps", "1", "--out", "/nonexistent-qkv-dir/m.npz"],
        pytest.param(["ring", "-n", "2", "--T", "8"], marks=pytest.mark.slow),
    ],
)
def test_without_torch_the_error_names_the_extra(args):
    done = qkv(*args, block="torch")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    command = "lab train" if args[0] == "lab" else args[0]
    assert lines[0] == (
        f"Error: 'qkv {command}' needs the Python package 'torch', which is "
        f"not installed: pip install 'qkv[torch]'"
    )


def test_help_works_without_torch():
    for args in (["ring", "--help"], ["lab", "train", "--help"]):
        done = qkv(*args, block="torch")
        assert done.returncode == 0 and "Usage: qkv" in done.stdout, done.stderr
