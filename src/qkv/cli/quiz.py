"""``qkv quiz``: exercises with fresh numbers, answered by the engine, a worked solution after each.

Interactive in a terminal ('?' for a hint, 'q' to quit); answers may also come from --answers
("a1;a2;...") or from stdin, one per line. Bad input re-asks; Ctrl-C or end of input prints the
score so far.
"""

from __future__ import annotations

import secrets
import shutil
import sys
import textwrap

import click

from qkv.cli.common import count_option, flag, seed_option
from qkv.cli.errors import CliError

TOPIC_NAMES = ("all", "sizes", "scores", "softmax", "masks", "concepts")
QUIT = ("q", "quit", "exit")


class _Stop(Exception):
    """The learner quit, or the answers ran out."""


class Answers:
    """Where answers come from: a prompt on a terminal, lines of stdin, or the --answers list."""

    def __init__(self, given: str | None):
        self.queue = None if given is None else [a.strip() for a in given.split(";")]
        self.stream = sys.stdin  # read at call time: click's test runner swaps it
        self.tty = self.queue is None and self.stream.isatty()

    @property
    def scripted(self) -> bool:
        return self.queue is not None

    def read(self, prompt: str) -> str:
        if self.queue is not None:
            if not self.queue:
                click.echo(prompt + "(no more answers)")
                raise _Stop
            text = self.queue.pop(0)
        elif self.tty:
            try:
                text = input(prompt)
            except EOFError:
                click.echo()
                raise _Stop from None
        else:
            click.echo(prompt, nl=False)
            line = self.stream.readline()
            if not line:
                click.echo()
                raise _Stop
            text = line.strip()
        if not self.tty:
            click.echo(text if self.queue is None else prompt + text)
        return text


@click.command(short_help="Practice: exercises on sizes, scores, softmax, masks, concepts.")
@click.option(
    "--topic",
    type=click.Choice(TOPIC_NAMES),
    default="all",
    show_default=True,
    help="Which exercises.  Example: --topic softmax",
)
@count_option(
    "--n",
    "n",
    default=5,
    most=100,
    help="How many exercises, all different (a topic with fewer says so).",
)
@seed_option(
    "Same seed, same exercises (default: a fresh one, printed).  Example: --seed 7", default=None
)
@click.option(
    "--kind",
    default=None,
    metavar="KIND",
    help="Only this exercise kind, e.g. sizes/d_head (see the list in --help-kinds).",
)
@flag("--help-kinds", "List the exercise kinds and exit.")
@click.option(
    "--answers",
    default=None,
    metavar='"A1;A2;..."',
    help="Answer without a terminal, one entry per exercise, separated by ';' (an "
    "entry that is not an answer counts as wrong).  Example, all three right: "
    "--n 3 --seed 1 --answers '9.8;3 4;d'",
)
def quiz(topic, n, seed, kind, help_kinds, answers):
    """Exercises on attention with fresh numbers; the engine checks every answer.

    \b
    Type the answer and Enter; '?' shows a hint, 'q' quits. After each answer the worked
    solution follows, right or wrong; the score comes at the end. One quiz never asks the
    same exercise twice.
    \b
    Examples:
      qkv quiz                                 five exercises from every topic
      qkv quiz --topic masks --n 3 --seed 7
      qkv quiz --topic sizes --n 3 --seed 1 --answers "24576;48;8"     all three right
      printf '24576\\n48\\n' | qkv quiz --topic sizes --n 2 --seed 1     both right
    """
    from qkv import practice

    if help_kinds:
        for name in practice.KINDS:
            click.echo(name)
        return
    if seed is None:
        seed = secrets.randbelow(10**6)
    if kind is not None and kind not in practice.KINDS:
        raise CliError(f"--kind must be one of {', '.join(practice.KINDS)}; got {kind!r}")
    try:
        exercises = practice.draw(topic, n, seed, kind=kind)  # n different exercises
    except ValueError as e:
        raise CliError(f"--n {n}: {e}") from None
    source = Answers(answers)
    click.echo(
        f"qkv quiz · {kind or topic} · {n} exercise{'s' * (n > 1)} · seed {seed} "
        f"(--seed {seed} repeats them)"
    )
    if not source.scripted:
        click.echo("Type your answer and press Enter; '?' shows a hint, 'q' quits.")
    right = done = 0
    try:
        for number, ex in enumerate(exercises, 1):
            correct = _ask(ex, number, len(exercises), source)
            done += 1
            right += correct
    except _Stop:
        pass
    except KeyboardInterrupt:
        click.echo()
        _score(right, done, len(exercises))
        sys.exit(130)
    _score(right, done, len(exercises))


def _ask(ex, number: int, total: int, source: Answers) -> bool:
    """Ask until a valid answer comes; whether it was right (a skipped --answers entry: False)."""
    from qkv import practice

    click.echo()
    click.echo(click.style(f"{number}/{total} · {ex.kind}", bold=True))
    for line in ex.prompt.splitlines():
        _say(line, indent=" " * (len(line) - len(line.lstrip())))
    for letter, choice in zip(practice.exercise.LETTERS, ex.choices, strict=False):
        _say(f"  {letter}) {choice}", indent="     ")
    click.echo(click.style(f"answer: {ex.answer_format()}", dim=True))
    while True:
        text = source.read("> ")
        if text.lower() in QUIT:
            raise _Stop
        if text == "?":
            click.echo(f"hint: {ex.hint}")
            if source.scripted:
                return _reveal(ex, None)
            continue
        try:
            verdict = practice.check(ex, text)
        except practice.AnswerError as e:
            if source.scripted:
                click.echo(f"not an answer: {e} (counted as wrong)")
                return _reveal(ex, None)
            click.echo(f"not an answer: {e}. Try again ('?' for a hint, 'q' to quit).")
            continue
        return _reveal(ex, verdict)


def _reveal(ex, verdict) -> bool:
    if verdict is None:
        click.echo(f"the answer: {ex.expected_text()}")
    elif verdict.correct:
        click.echo(
            click.style("✓ right", fg="green", bold=True) + f": {verdict.expected}" + _gap(verdict)
        )
    else:
        click.echo(
            click.style("✗ not quite", fg="red", bold=True)
            + f": you said {verdict.given}, the answer is {verdict.expected}"
            + _gap(verdict)
        )
    click.echo("worked solution:")
    for line in ex.solution:
        _say(f"  {line}", indent="    ")
    return bool(verdict and verdict.correct)


def _say(line: str, *, indent: str = "") -> None:
    """One line, wrapped on a terminal (at most 100 columns) and continued at ``indent``;
    left whole when the output goes to a file or a pipe."""
    if not sys.stdout.isatty():
        click.echo(line)
        return
    width = min(shutil.get_terminal_size((100, 24)).columns, 100)
    click.echo(
        textwrap.fill(
            line,
            width=width,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        or line
    )


def _gap(verdict) -> str:
    return f" (off by {verdict.gap:.3g})" if verdict.gap else ""


def _score(right: int, done: int, total: int) -> None:
    click.echo()
    left = f", {total - done} not answered" if done < total else ""
    pct = f" ({100 * right / done:.0f}%)" if done else ""
    click.echo(click.style(f"score: {right}/{done}{pct}{left}", bold=True))


if __name__ == "__main__":  # python -m qkv.cli.quiz, before `qkv quiz` is registered
    quiz()
