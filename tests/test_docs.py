"""The documentation site's integrity, without building it (`make docs` does that): every page is
in the navigation, every command has its section, every public name its reference entry, the
notebooks are stored without outputs, and the hand-computed tutorial still agrees with qkv."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from pathlib import Path

import pytest

import qkv

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HOOKS = DOCS / "hooks"
MKDOCS = (ROOT / "mkdocs.yml").read_text()


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hooks_{name}", HOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav() -> list[str]:
    nav = MKDOCS.split("\nnav:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"([\w./-]+\.(?:md|ipynb))\s*$", nav, re.M)


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    pages = {
        str(p.relative_to(DOCS))
        for p in DOCS.rglob("*")
        if p.suffix in (".md", ".ipynb")
        and "hooks" not in p.parts
        and ".ipynb_checkpoints" not in p.parts
    }
    nav = _nav()
    assert len(nav) == len(set(nav)), "a page is listed twice"
    assert set(nav) == pages
    assert (
        "architecture.md" in nav
    )  # docs/architecture.md is the contributors' map, read by tests too


def test_cli_page_has_a_section_with_the_help_of_every_command():
    click = pytest.importorskip("click")
    from qkv.cli import COMMANDS, main

    text = _hook("cli_reference").markdown()
    assert "<!-- every command's --help" in (DOCS / "cli.md").read_text()
    assert "\\b" not in text  # click's no-rewrap marker is the backspace character, not "\\b"
    ctx = click.Context(main, info_name="qkv")
    for name in COMMANDS:
        assert re.search(rf"^## qkv {name}\n\n```text\nUsage: qkv {name} ", text, re.M), name
        command = main.get_command(ctx, name)
        assert not command.help.startswith("(unavailable"), f"qkv {name}: {command.help}"
        for sub in getattr(command, "commands", {}):
            assert re.search(
                rf"^### qkv {name} {sub}\n\n```text\nUsage: qkv {name} {sub} ", text, re.M
            )
    # each summary row links to a heading that exists
    for anchor in re.findall(r"\]\(#([\w-]+)\)", text):
        assert (
            f"\n## {anchor.replace('-', ' ')}\n" in text
            or f"\n### {anchor.replace('-', ' ')}\n" in text
        )


def _documented() -> set[str]:
    return {
        m
        for page in (DOCS / "reference").glob("*.md")
        for m in re.findall(r"^::: ([\w.]+)$", page.read_text(), re.M)
    }


def test_the_api_reference_has_every_public_name():
    documented = _documented()
    targets = {name: getattr(qkv, name) for name in qkv.__all__ if name != "show"}
    found = {}
    for ident in documented:
        module, _, attr = ident.rpartition(".")
        try:
            obj = importlib.import_module(ident)
        except ImportError:
            try:
                obj = getattr(importlib.import_module(module), attr)
            except ImportError as e:  # an extra this environment lacks (hf, notebook)
                pytest.skip(f"{ident}: {e}")
        found[ident] = obj
    for name, obj in targets.items():
        assert any(o is obj for o in found.values()), f"qkv.{name} has no ::: entry"
    assert "qkv.notebook.widget.show" in documented  # qkv.show, loaded on first use
    assert {"qkv.hf", "qkv.models"} <= documented


def _notebooks() -> list[Path]:
    return sorted((DOCS / "tutorials").glob("*.ipynb"))


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.name)
def test_notebooks_are_stored_without_outputs_and_end_in_a_picture(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None  # the build runs them
    # the last code cell draws: a figure, or an object that displays itself as HTML
    last = "".join(code[-1]["source"])
    assert "plt.show()" in last or re.fullmatch(r"\w+", last.strip())


def test_the_hand_computed_tutorial_agrees_with_qkv(monkeypatch):
    """Runs attention-by-hand.ipynb's code: its asserts compare qkv with arithmetic on lists."""
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = json.loads((DOCS / "tutorials" / "attention-by-hand.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    sources = ["".join(cell["source"]) for cell in code]
    assert sum(len(re.findall(r"^\s*assert ", s, re.M)) for s in sources) >= 20
    namespace: dict = {}
    for source in sources:  # an assert that fails raises here
        exec(compile(source, "attention-by-hand.ipynb", "exec"), namespace)
    import matplotlib.pyplot as plt

    plt.close("all")


def test_the_docstring_layout_makes_only_parameter_lines_items():
    pytest.importorskip("griffe", reason="the docs extra is not installed (make docs installs it)")
    lay_out = _hook("docstrings").lay_out
    text = (
        "Scaled attention.\n\nq (..., L, d_k) -> (..., L, d_v); grouped-query\n"
        "attention: each K/V head serves a group.\nmask: boolean, True = may attend,\n"
        "broadcastable to (L, S).\nscale, tau (> 0): numbers.\nReturns out."
    )
    out = lay_out(text, {"q", "mask", "scale", "tau"}).splitlines()
    assert "attention: each K/V head serves a group." in out  # not a parameter: left alone
    assert "- **mask**: boolean, True = may attend," in out
    assert "  broadcastable to (L, S)." in out
    assert "- **scale, tau (> 0)**: numbers." in out
    assert out[-2:] == ["", "Returns out."]


def test_getting_started_says_how_to_get_torch_for_the_cpu():
    text = " ".join((DOCS / "getting-started.md").read_text().split())
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in text
    assert "PyPI's CUDA build" in text
    makefile = (ROOT / "Makefile").read_text()
    pinned = re.search(r"^TORCH\s*:=\s*torch==(\S+)$", makefile, re.M).group(1)
    assert f"add `=={pinned}` for the version `make test` pins" in text
    assert re.search(r'^torch = \["torch', (ROOT / "pyproject.toml").read_text(), re.M)


def test_the_lab_page_reads_the_checkpoint_that_lab_train_writes():
    click = pytest.importorskip("click")
    from qkv.cli.lab import lab

    ctx = click.Context(lab, info_name="lab")
    train = next(p for p in lab.get_command(ctx, "train").params if p.name == "out")
    assert "--out" in train.opts
    text = (DOCS / "lab.md").read_text()
    trained = re.search(r"^qkv lab train (.*--out .*)$", text, re.M).group(1).split()
    read = re.search(r"^qkv explain --checkpoint (\S+)", text, re.M).group(1)
    assert trained[trained.index("--out") + 1] == read
