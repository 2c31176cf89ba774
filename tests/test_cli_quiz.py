"""`qkv quiz` as a program: scripted through --answers and stdin (CliRunner), and as a real
terminal program under pexpect (a pseudo-terminal): right, wrong, bad input, hint, quit, EOF,
Ctrl-C. Right answers are worked out here from the printed question, not from qkv."""

from __future__ import annotations

import os
import re
import sys

import pytest
from click.testing import CliRunner

from qkv.cli.quiz import quiz


def run(*args, input=None):
    return CliRunner().invoke(quiz, list(args), input=input)


HEADS = re.compile(r"d_model = (\d+)(?: and|,) (\d+) heads")
CAUSAL = re.compile(
    r"L = (\d+) queries over S = (\d+) keys .*?, (\S+) alignment\. "
    r"Which keys does query (\d+) NOT see"
)


def d_head_answers(output: str) -> list[int]:
    return [int(d) // int(h) for d, h in HEADS.findall(output)]


def hidden_answers(output: str) -> list[str]:
    out = []
    for L, S, align, i in CAUSAL.findall(output):
        L, S, i = int(L), int(S), int(i)
        offset = S - L if align == "bottom-right" else 0
        out.append(" ".join(str(j) for j in range(S) if j > i + offset) or "none")
    return out


def test_answers_option_right_and_wrong():
    first = run("--kind", "sizes/d_head", "--n", "3", "--seed", "4", "--answers", ";;")
    right = d_head_answers(first.output)
    assert len(right) == 3
    result = run(
        "--kind",
        "sizes/d_head",
        "--n",
        "3",
        "--seed",
        "4",
        "--answers",
        f"{right[0]};{right[1] + 1};{right[2]}",
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("✓ right") == 2 and result.output.count("✗ not quite") == 1
    assert f"you said {right[1] + 1:,}, the answer is {right[1]:,}" in result.output
    assert result.output.count("worked solution:") == 3
    assert "score: 2/3 (67%)" in result.output
    assert "\x1b[" not in result.output  # no colour codes when not a terminal


def test_masks_through_the_cli_match_the_alignment_rule():
    probe = run("--kind", "masks/hidden", "--n", "4", "--seed", "9", "--answers", ";;;")
    answers = hidden_answers(probe.output)
    assert len(answers) == 4
    result = run(
        "--kind", "masks/hidden", "--n", "4", "--seed", "9", "--answers", ";".join(answers)
    )
    assert "score: 4/4 (100%)" in result.output, result.output


def test_stdin_lines_bad_input_reasks():
    probe = run("--kind", "sizes/d_head", "--n", "1", "--seed", "2", "--answers", "")
    right = d_head_answers(probe.output)[0]
    result = run("--kind", "sizes/d_head", "--n", "1", "--seed", "2", input=f"sixty\n?\n{right}\n")
    assert result.exit_code == 0, result.output
    assert "not an answer: expected a number" in result.output
    assert "hint: Each head gets an equal slice of d_model." in result.output
    assert "score: 1/1 (100%)" in result.output


def test_stdin_running_out_prints_the_score_so_far():
    result = run("--topic", "concepts", "--n", "3", "--seed", "1", input="a\n")
    assert result.exit_code == 0
    assert re.search(r"score: [01]/1 \(\d+%\), 2 not answered", result.output)


def test_answers_entry_that_is_not_an_answer_counts_as_wrong():
    result = run("--kind", "masks/hidden", "--n", "2", "--seed", "3", "--answers", "banana;q")
    assert "not an answer: expected key positions" in result.output
    assert "(counted as wrong)" in result.output
    assert "score: 0/1 (0%), 1 not answered" in result.output


def test_same_seed_same_questions_and_seed_is_printed():
    a = run("--topic", "all", "--n", "5", "--seed", "77", "--answers", "")
    b = run("--topic", "all", "--n", "5", "--seed", "77", "--answers", "")
    assert a.output == b.output and "seed 77" in a.output
    fresh = run("--n", "1", "--answers", "")
    assert re.search(r"seed \d+ \(--seed \d+ repeats them\)", fresh.output)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--topic", "algebra"], "Invalid value for '--topic'"),
        (["--n", "0"], "Invalid value for '--n'"),
        (["--seed", "-3"], "Invalid value for '--seed'"),
        (["--kind", "sizes/nope"], "--kind must be one of"),
    ],
)
def test_bad_options_are_one_line_errors(args, message):
    result = run(*args, "--answers", "")
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_every_example_answer_in_help_is_right():
    """Each example in --help that gives answers is run as written; the checker marks all of
    them right (the help says so)."""
    import shlex

    text = run("--help").output
    flat = " ".join(text.split())
    runs = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("qkv quiz") and "--answers" in line:
            runs.append((shlex.split(line.split("  ")[0])[2:], None))
        elif line.startswith("printf"):
            feed, command = line.split(" | ")
            runs.append(
                (shlex.split(command.split("  ")[0])[2:], shlex.split(feed)[1].replace("\\n", "\n"))
            )
    option = re.search(r"Example, all three right: (--n 3 --seed 1 --answers '[^']*')", flat)
    runs.append((shlex.split(option.group(1)), None))
    assert len(runs) == 3
    for args, feed in runs:
        result = run(*args, input=feed)
        assert result.exit_code == 0, result.output
        n = int(args[args.index("--n") + 1])
        assert f"score: {n}/{n} (100%)" in result.output, (args, result.output)


def test_one_quiz_never_repeats_an_exercise():
    result = run("--topic", "concepts", "--n", "7", "--seed", "3", "--answers", ";" * 6)
    questions = re.findall(r"^\d/7 · \S+\n(.*)$", result.output, re.M)
    assert len(questions) == 7 and len(set(questions)) == 7  # 7 kinds, one question each
    result = run("--topic", "concepts", "--n", "8", "--answers", "")
    assert result.exit_code == 2
    assert result.output.strip() == (
        "Error: --n 8: topic 'concepts' has 7 different exercises; "
        "asked for 8, so some would repeat (ask for 7 or fewer)"
    )
    result = run("--kind", "masks/empty_row_value", "--n", "3", "--seed", "1", "--answers", ";;")
    assert result.exit_code == 0, result.output
    assert len(set(re.findall(r"with L = \d+ queries and S = \d+ keys", result.output))) == 3


def test_help_kinds_lists_every_kind():
    from qkv import practice

    result = run("--help-kinds")
    assert result.output.split() == list(practice.KINDS)


# ---- a real terminal -----------------------------------------------------------------------

pexpect = pytest.importorskip("pexpect", reason="pexpect is not installed (dev extra)")


def spawn(*args):
    env = dict(os.environ, COLUMNS="200", LINES="40")  # questions on one line each
    child = pexpect.spawn(
        sys.executable,
        ["-m", "qkv.cli.quiz", *args],
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
        env=env,
    )
    return child


def question(child) -> int:
    """Wait for a d_head question and work out its answer from the text."""
    child.expect(HEADS)
    d, h = int(child.match.group(1)), int(child.match.group(2))
    child.expect("> ")
    return d // h


def test_terminal_session_right_wrong_bad_hint_quit():
    child = spawn("--kind", "sizes/d_head", "--n", "4", "--seed", "8")
    child.expect("'\\?' shows a hint, 'q' quits")
    right = question(child)
    child.sendline(str(right))
    child.expect("✓ right")
    child.expect("worked solution:")
    child.expect(f"d_head = d_model / n_heads = .* = {right}")

    right = question(child)
    child.sendline("?")
    child.expect("hint: Each head gets an equal slice of d_model.")
    child.expect("> ")
    child.sendline("lots")
    child.expect("not an answer: expected a number .* Try again")
    child.expect("> ")
    child.sendline(str(right * 2))
    child.expect(f"✗ not quite.*you said {right * 2:,}, the answer is {right:,}")

    question(child)
    child.sendline("q")
    child.expect("score: 1/2 \\(50%\\), 2 not answered")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_terminal_end_of_input_and_ctrl_c_print_the_score():
    child = spawn("--kind", "sizes/d_head", "--n", "3", "--seed", "8")
    right = question(child)
    child.sendline(str(right))
    child.expect("✓ right")
    child.expect("> ")
    child.sendeof()
    child.expect("score: 1/1 \\(100%\\), 2 not answered")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    child = spawn("--topic", "softmax", "--n", "2", "--seed", "8")
    child.expect("> ")
    child.sendintr()
    child.expect("score: 0/0, 2 not answered")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert "Traceback" not in (child.before or "")


def test_runs_under_the_lazy_qkv_group():
    from qkv.cli import LazyGroup

    group = LazyGroup("qkv", lazy={"quiz": "qkv.cli.quiz:quiz"})
    result = CliRunner().invoke(
        group, ["quiz", "--topic", "scores", "--n", "2", "--seed", "3", "--answers", "q"]
    )
    assert result.exit_code == 0, result.output
    assert "qkv quiz · scores · 2 exercises · seed 3" in result.output
    assert "score: 0/0, 2 not answered" in result.output
