"""README.md as a new user meets it: every code block runs, in order, and what it says holds.

Blocks run top to bottom in one scratch directory: ``bash`` blocks a command at a time through
the ``qkv`` script of this Python's environment, ``python`` blocks in one shared namespace. A
block runs on the extras it names (``pip install 'qkv[hf]'``) and, when it names a bundled
model, that model's weight package; without them it is skipped, naming what is missing. Two
kinds of command are not run as written, each for a stated reason: ``make`` (it builds the
environment these tests run in) and ``qkv serve`` (it serves until stopped: it is started on a
free port, asked for its page and its scenes, and stopped with Ctrl-C's signal).
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest
from server_process import server_process

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text()
BIN = Path(sys.executable).parent  # this environment's scripts: `qkv` among them
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)
NOT_RUN = {
    "make": "make run and make test build the environment these tests run in (make test is "
    "this very suite); the Makefile's own targets are what CI runs"
}


def _blocks() -> list[tuple[str, str, int]]:
    """(language, code, line) of every fenced block, in order."""
    return [(m[1], m[2], TEXT.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(TEXT)]


BLOCKS = _blocks()


def _commands(code: str) -> list[str]:
    """A bash block's commands: its lines without comments, continuations joined."""
    joined = re.sub(r"\\\n\s*", " ", code)
    words = (shlex.split(line, comments=True) for line in joined.split("\n"))
    return [shlex.join(w) for w in words if w]


def _missing(code: str) -> list[str]:
    """What this environment lacks of what the block names: its extras' packages, and the
    weight package of each bundled model it names."""
    from qkv.models import NAMES

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    named = set(re.findall(r"qkv\[(\w+)\]", code))
    needed: list[str] = []
    models = [name for name in NAMES if name in code]
    if models:
        named.add("models")
        needed += [NAMES[name][1] for name in models]
    if re.search(r"^qkv serve\b", code, re.M):
        named.add("web")
    for extra in sorted(named):
        if extra not in extras:
            pytest.fail(f"README names the extra qkv[{extra}], which pyproject.toml lacks")
        needed += [re.match(r"[\w.-]+", r)[0] for r in extras[extra]]
    out = []
    for package in needed:
        try:
            importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            out.append(package)
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """The directory every block runs in, and the namespace the python blocks share."""
    return tmp_path_factory.mktemp("readme"), {"__name__": "__readme__"}


def _env() -> dict:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env["MPLBACKEND"] = "Agg"
    return env


def _run(command: str, cwd: Path) -> None:
    run = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, f"{command}\n{run.stdout[-1500:]}\n{run.stderr[-1500:]}"
    assert run.stdout.strip(), f"{command} printed nothing"
    assert "Error:" not in run.stderr and "Traceback" not in run.stderr, run.stderr[-1500:]


def _serve(command: str, cwd: Path) -> None:
    """Start the server on a free port (8000 may be taken where the tests run), read the URL
    it prints, fetch the page and the scenes, stop it as Ctrl-C would."""
    argv = ["bash", "-c", f"exec {command} --port 0"]
    with server_process(argv, stop=signal.SIGINT, cwd=cwd, env=_env()) as (proc, url):
        with urllib.request.urlopen(url + "/", timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read()
        with urllib.request.urlopen(url + "/api/presets", timeout=30) as presets:
            assert b"cat-sat" in presets.read()
    assert "Traceback" not in proc.stderr.read()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("lang", "code", "line"), BLOCKS, ids=[f"line{line}-{lang}" for lang, _, line in BLOCKS]
)
def test_every_block_runs_in_order(lang, code, line, scratch, monkeypatch):
    directory, namespace = scratch
    assert lang in ("bash", "python"), f"README line {line}: a {lang} block cannot be run"
    missing = _missing(code)
    if missing:
        pytest.skip(f"README line {line} needs {', '.join(missing)}, not installed here")
    if lang == "python":
        monkeypatch.chdir(directory)
        monkeypatch.setenv("MPLBACKEND", "Agg")
        exec(compile(code, f"README.md:{line}", "exec"), namespace)
        return
    commands = _commands(code)
    assert commands, f"README line {line}: an empty block"
    skipped = [c for c in commands if c.split()[0] in NOT_RUN]
    for command in commands:
        if command in skipped:
            continue
        if command.startswith("qkv serve"):
            _serve(command, directory)
        else:
            _run(command, directory)
    if skipped and len(skipped) == len(commands):
        pytest.skip(NOT_RUN[skipped[0].split()[0]])


def test_the_api_example_prints_what_its_comments_say():
    code = re.search(r"## The API in ten lines\n\n```python\n(.*?)```", TEXT, re.S).group(1)
    assert len(code.strip().splitlines()) <= 10
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    claimed = re.findall(r"print\(.*?\)\s+# (\[[^\]]*\])", code)
    assert run.stdout.splitlines() == claimed
    w1 = math.e / (1 + math.e)  # hand value: softmax(0, 1)[1]
    assert claimed == [f"[{2 * (1 - w1):.3f} {3 * w1:.3f}]", f"[{1 - w1:.3f} {w1:.3f}]"]


def test_it_starts_with_the_two_commands_and_stays_short():
    first = _commands(BLOCKS[0][1])
    assert first == ["make run", "make test"]
    assert len(TEXT.splitlines()) <= 200


def test_it_says_what_make_run_installs_as_the_makefile_does():
    makefile = (ROOT / "Makefile").read_text()
    text = " ".join(TEXT.split())
    base = re.search(r"^\$\(VENV\)/\.base:.*?\n((?:\t.*\n)+)", makefile, re.M).group(1)
    weights = re.search(r"^MODEL_WEIGHTS\s*:=\s*(.+)$", makefile, re.M).group(1).split()
    assert re.search(r"^run: \$\(VENV\)/\.base", makefile, re.M)
    assert "$(MODEL_WEIGHTS)" in base and "$(TORCH)" not in base  # weights yes, torch no
    assert "-e '.[web,plot,models]'" in base
    assert (
        "`make run` installs qkv with its `web`, `plot` and `models` extras **and** the two "
        "models' weight packages" in text
    )
    for package in weights:
        assert f"`{package.split('==')[0]}`" in text
    pinned = re.search(r"^TORCH\s*:=\s*(\S+)$", makefile, re.M).group(1)
    assert "It does not install torch." in text and "pip install 'qkv[torch]'" in text
    assert f"{pinned} (CPU)" in text  # what make test installs


def test_every_link_and_picture_points_at_a_file_that_exists():
    targets = re.findall(r"\]\(([^)\s]+)\)", TEXT)
    local = [t for t in targets if not re.match(r"\w+://", t)]
    assert "docs/assets/page.png" in local
    for target in local:
        path, _, anchor = target.partition("#")
        assert (ROOT / path).is_file(), target
        if anchor:  # a heading of that page, as mkdocs makes its anchor
            headings = re.findall(r"^#+ (.+)$", (ROOT / path).read_text(), re.M)
            slugs = {re.sub(r"[^\w-]", "", h.lower().replace(" ", "-")) for h in headings}
            assert anchor in slugs, target
