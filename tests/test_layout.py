"""The layout keeps its layers: read every import in src/qkv and check the rules in
docs/architecture.md (inner layers import no outer one, no cycles, click only in cli/, fastapi
only in web/, no source file past 400 lines)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "qkv"
ENGINE = {
    "qkv.steps",
    "qkv.checks",
    "qkv.masks",
    "qkv.attention",
    "qkv.trace",
    "qkv.cache",
    "qkv.multihead",
    "qkv.layers",
    "qkv.display",
    "qkv.lazy",
    "qkv.tiles",
    "qkv.readers",
    "qkv.blas",
}
OUTER = (
    "qkv.explain",
    "qkv.cli",
    "qkv.web",
    "qkv.models",
    "qkv.lab",
    "qkv.practice",
    "qkv.bench",
    "qkv.distributed",
    "qkv.notebook",
    "qkv.hf",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str) -> set[str]:
    """Every module of this package, or third-party top-level package, that ``name`` imports
    (at module level or inside a function)."""
    tree = ast.parse(MODULES[name].read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x
                base = name.rsplit(".", node.level - (name not in _packages()))[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in MODULES else base)
    return found


def _packages() -> set[str]:
    return {n for n, p in MODULES.items() if p.name == "__init__.py"}


def inner_edges():
    for name in MODULES:
        for target in imports(name):
            if target in MODULES and target != name:
                yield name, target


# Every module's layer, lowest first; a module imports only from its own layer or a lower one.
# Within the engine the order is finer: the steps, then what checks and keeps them, the
# reference (and the lazy trace's tiles, computed by it), the kernels, attention (and the lazy
# trace, which runs a kernel), multi-head attention.
LAYERS = [
    ("steps", {"qkv.steps", "qkv.masks", "qkv.blas"}),
    (
        "contract",
        {"qkv.checks", "qkv.trace", "qkv.readers", "qkv.display", "qkv.layers", "qkv.cache"},
    ),
    ("reference", {"qkv.reference", "qkv.tiles"}),
    ("kernels", {"qkv.kernels"}),
    ("attention", {"qkv.attention", "qkv.lazy"}),
    ("multihead", {"qkv.multihead"}),
    ("explain", {"qkv.explain"}),
    (
        "domains",
        {"qkv.models", "qkv.hf", "qkv.lab", "qkv.practice", "qkv.distributed", "qkv.bench"},
    ),
    ("views", {"qkv.views"}),
    ("surfaces", {"qkv.web", "qkv.notebook"}),  # neither imports the other
    # the package's API and the entry points: the command, and python -m qkv.web (its alias)
    ("entry", {"qkv", "qkv.cli", "qkv.web.__main__"}),
]
SURFACES = ("qkv.web", "qkv.notebook", "qkv.cli")


def layer_of(name: str) -> int:
    """The index in LAYERS of the module ``name`` (its longest listed prefix decides)."""
    best = None
    for index, (_, roots) in enumerate(LAYERS):
        for root in roots:
            if (name == root or name.startswith(root + ".")) and (
                best is None or len(root) > len(best[1])
            ):
                best = (index, root)
    assert best is not None, f"{name} has no layer in LAYERS: add it"
    return best[0]


def surface_of(name: str) -> str | None:
    return next((s for s in SURFACES if name == s or name.startswith(s + ".")), None)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_from_a_higher_layer(name):
    mine = layer_of(name)
    up = sorted(t for t in imports(name) if t in MODULES and layer_of(t) > mine)
    assert not up, f"{name} ({LAYERS[mine][0]}) imports from a higher layer: {up}"


@pytest.mark.parametrize(
    "name",
    sorted(n for n in MODULES if surface_of(n) in SURFACES[:2] and layer_of(n) < len(LAYERS) - 1),
)
def test_the_server_and_the_notebook_import_no_other_surface(name):
    other = sorted(t for t in imports(name) if surface_of(t) not in (None, surface_of(name)))
    assert not other, f"{name} imports another surface: {other}"


def test_the_layer_test_catches_an_upward_import():
    assert layer_of("qkv.steps") < layer_of("qkv.kernels.fused") < layer_of("qkv.views.grid")
    assert layer_of("qkv.views.viewers") < layer_of("qkv.web.app") < layer_of("qkv.cli.serve")


def test_every_module_is_seen():
    assert {"qkv.steps", "qkv.checks", "qkv.kernels.dispatch", "qkv.cli", "qkv.web.app"} <= set(
        MODULES
    )


@pytest.mark.parametrize(
    "name", sorted(n for n in MODULES if n in ENGINE or n.startswith("qkv.kernels"))
)
def test_engine_and_kernels_import_no_outer_layer(name):
    outer = sorted(t for t in imports(name) if t.startswith(OUTER))
    assert not outer, f"{name} imports {outer}"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the directed graph as a path [a, ..., a], or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt, path + [nxt])):
                return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node, [node])):
            return found
    return None


def test_no_import_cycles():
    graph: dict[str, set[str]] = {}
    for a, b in inner_edges():
        graph.setdefault(a, set()).add(b)
    assert find_cycle(graph) is None


def test_the_notebook_widget_loads_anywidget_only_in_its_own_module():
    strays = sorted(n for n in MODULES if n != "qkv.notebook.widget" and "anywidget" in imports(n))
    assert not strays, f"anywidget is imported outside qkv.notebook.widget: {strays}"


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


@pytest.mark.parametrize(
    "library, home",
    [
        ("click", "qkv.cli"),
        ("fastapi", "qkv.web"),
        ("starlette", "qkv.web"),
        ("uvicorn", "qkv.web"),
    ],
)
def test_surface_libraries_stay_in_their_surface(library, home):
    strays = sorted(
        n
        for n in MODULES
        if not (n == home or n.startswith(home + "."))
        and any(t == library or t.startswith(library + ".") for t in imports(n))
    )
    assert not strays, f"{library} is imported outside {home}: {strays}"


def test_no_source_file_over_400_lines():
    long = {n: len(p.read_text().splitlines()) for n, p in MODULES.items()}
    assert not {n: c for n, c in long.items() if c > 400}
