"""docs/architecture.md is the map a contributor reads: every module it names exists, and every
module of src/qkv (and every file of the page) is named in it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "qkv"
DOC = (ROOT / "docs" / "architecture.md").read_text()
NAMED = set(re.findall(r"[\w/]*\w+\.(?:py|js|css|html)\b", DOC))
ENTRY = {"__init__.py", "__main__.py"}


def sources() -> list[Path]:
    files = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.js"), *PACKAGE.rglob("*.css")]
    return sorted(p for p in files if p.name not in ENTRY and "__pycache__" not in p.parts)


def test_every_module_is_named():
    missing = sorted(
        str(p.relative_to(PACKAGE))
        for p in sources()
        if p.name not in {n.rsplit("/", 1)[-1] for n in NAMED}
    )
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_every_file_it_names_exists():
    here = {p.name for p in sources()} | ENTRY | {"index.html"}
    elsewhere = {p.name for d in ("tests", "benchmarks") for p in (ROOT / d).rglob("*.py")}
    stale = sorted(n for n in NAMED if n.rsplit("/", 1)[-1] not in here | elsewhere)
    assert not stale, f"docs/architecture.md names files that do not exist: {stale}"


def test_the_check_sees_the_package():
    assert len(sources()) > 100 and "steps.py" in {p.name for p in sources()}
