"""One ES module string from the page's own JavaScript files, for anywidget and exported HTML.

anywidget takes a single ESM string, and an exported HTML file must hold its scripts inline, so
the modules are joined here, at import time, from the files shipped in the wheel: the import
graph of an entry module (``widget.js``, which imports the page's ``panels.js``, ``render.js``
and ``dom.js`` from ``web/static/``) is walked, and each module becomes a function that runs its
body once and returns its exports, dependencies first, as a browser would run them. The page's
modules find their elements inside the root they are given and keep their memory per root, so
two widgets on one notebook page share one copy of the modules and keep their own elements.

The JavaScript is read, never rewritten beyond its ``import``/``export`` lines; what the
joiner understands (static relative imports; ``export`` before a declaration, ``export {…}``,
``export {…} from``, ``export default``) covers the page's modules, and anything else is an error naming the file.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATIC = HERE.parent / "web" / "static"
ENTRY = HERE / "widget.js"

_IMPORT = re.compile(
    r"""^import\s+(?:(?P<what>[\w$]+|\*\s+as\s+[\w$]+|\{[^}]*\})\s+from\s+)?["'](?P<path>[^"']+)["'];?""",
    re.MULTILINE,
)
_EXPORT_DECL = re.compile(
    r"^export\s+(?P<kind>async\s+function\*?|function\*?|class|const|let|var)\s+(?P<name>[\w$]+)",
    re.MULTILINE,
)
_REEXPORT = re.compile(
    r"""^export\s*\{(?P<names>[^}]*)\}\s*from\s*["'](?P<path>[^"']+)["'];?""", re.MULTILINE
)
_EXPORT_LIST = re.compile(r"^export\s*\{(?P<names>[^}]*)\}\s*;?", re.MULTILINE)
_EXPORT_DEFAULT = re.compile(r"^export\s+default\s+", re.MULTILINE)
_STRAY = re.compile(r"^\s*(import|export)\b|\bimport\s*\(", re.MULTILINE)


class BundleError(ValueError):
    """A module uses a form of import or export that the joiner does not handle."""


def _names(spec: str) -> list[tuple[str, str]]:
    """'a, b as c' -> [('a', 'a'), ('b', 'c')] (exported name, local name)."""
    out = []
    for part in spec.split(","):
        part = part.strip()
        if part:
            name, _, local = part.partition(" as ")
            out.append((name.strip(), (local or name).strip()))
    return out


def _module(path: Path) -> tuple[str, list[Path]]:
    """(function body, imported paths) of one module."""
    text = path.read_text()
    deps: list[Path] = []
    lines: list[str] = []

    def ref_to(target: str) -> str:
        """The expression for an imported module's exports; records the dependency."""
        if not target.startswith("."):
            raise BundleError(f"{path.name}: only relative imports can be bundled, got {target!r}")
        dep = (path.parent / target).resolve()
        if not dep.is_file():
            raise BundleError(f"{path.name}: imports {target!r}, which is not a file ({dep})")
        deps.append(dep)
        return f"__mods[{json.dumps(str(dep))}]"

    def bind(m: re.Match) -> str:
        spec = m["what"]
        ref = ref_to(m["path"])
        if spec is None:  # import "./x.js": run for its effects (it runs once, before this one)
            return ""
        if spec.startswith("*"):
            return f"const {spec.split()[-1]} = {ref};"
        if spec.startswith("{"):
            pairs = ", ".join(n if n == loc else f"{n}: {loc}" for n, loc in _names(spec[1:-1]))
            return f"const {{ {pairs} }} = {ref};"
        return f"const {spec} = {ref}.default;"

    exported: list[tuple[str, str]] = []  # (exported name, local name or expression)
    body = _IMPORT.sub(bind, text)

    def passed_on(m: re.Match) -> str:  # export { name as alias } from "./x.js"
        ref = ref_to(m["path"])
        exported.extend((alias, f"{ref}[{json.dumps(name)}]") for name, alias in _names(m["names"]))
        return ""

    body = _REEXPORT.sub(passed_on, body)

    def decl(m: re.Match) -> str:
        exported.append((m["name"], m["name"]))
        return f"{m['kind']} {m['name']}"

    body = _EXPORT_DECL.sub(decl, body)

    def listed(m: re.Match) -> str:  # export { local as name }
        exported.extend((name, local) for local, name in _names(m["names"]))
        return ""

    body = _EXPORT_LIST.sub(listed, body)
    if _EXPORT_DEFAULT.search(body):
        body = _EXPORT_DEFAULT.sub("const __default = ", body, count=1)
        exported.append(("default", "__default"))
    stray = _STRAY.search(body)
    if stray:
        line = body[: stray.start()].count("\n") + 1
        raise BundleError(
            f"{path.name}: cannot bundle the import/export near line {line}: "
            f"{body.splitlines()[line - 1].strip()!r}"
        )
    ret = ", ".join(f"{json.dumps(name)}: {local}" for name, local in exported)
    lines.append(body.rstrip())
    lines.append(f"return {{ {ret} }};")
    return "\n".join(lines), deps


def graph(entry: Path = ENTRY) -> list[tuple[Path, str]]:
    """The modules reachable from ``entry``, dependencies first: [(path, function body)]."""
    order: list[tuple[Path, str]] = []
    state: dict[Path, int] = {}  # 1 = being visited, 2 = done

    def visit(path: Path, chain: list[str]):
        if state.get(path) == 2:
            return
        if state.get(path) == 1:
            raise BundleError("import cycle: " + " -> ".join(chain + [path.name]))
        state[path] = 1
        body, deps = _module(path)
        for dep in deps:
            visit(dep, chain + [path.name])
        state[path] = 2
        order.append((path, body))

    visit(entry.resolve(), [])
    return order


def _label(path: Path) -> str:
    for base, prefix in ((STATIC, "web/static/"), (HERE, "notebook/")):
        if path.is_relative_to(base):
            return prefix + path.relative_to(base).as_posix()
    return path.name


def stylesheets() -> list[Path]:
    """The page's stylesheets in the order index.html links them, then the widget's own."""
    page = (STATIC / "index.html").read_text()
    found = re.findall(
        r"""<link[^>]+rel=["']stylesheet["'][^>]*href=["']/static/([^"']+)["']""", page
    )
    return [STATIC / name for name in found] + [HERE / "widget.css"]


def _scoped_css(text: str) -> str:
    """The page's CSS for a shadow root: ``:root`` and ``body`` rules apply to the view's box."""
    return re.sub(
        r"(^|[},]\s*)(:root|body)(?=\s*[{,])",
        lambda m: m[1] + (":host" if m[2] == ":root" else ".qkv-page"),
        text,
        flags=re.MULTILINE,
    )


@functools.cache
def css() -> str:
    """Every stylesheet the view needs, one string, scoped for a shadow root."""
    return "\n".join(f"/* {_label(p)} */\n{_scoped_css(p.read_text())}" for p in stylesheets())


@functools.cache
def esm(entry: Path = ENTRY, *, export: bool = True) -> str:
    """The ES module: ``export default {render}`` (anywidget's interface) when ``export``,
    else the same object bound to the name ``qkvWidget`` (for an inline <script>)."""
    parts = [
        "// qkv: the simulator page's modules joined into one (qkv/notebook/bundle.py).",
        f"const QKV_CSS = {json.dumps(css())};",
        "const __mods = {};",
    ]
    for path, body in graph(entry):
        parts.append(f"// ---- {_label(path)}")
        parts.append(f"__mods[{json.dumps(str(path))}] = (() => {{\n{body}\n}})();")
    parts.append("const qkvWidget = {")
    parts.append(
        f"  render: ({{ model, el }}) => __mods[{json.dumps(str(entry.resolve()))}]"
        ".render({ model, el, css: QKV_CSS }),"
    )
    parts.append("};")
    parts.append("export default qkvWidget;" if export else "")
    text = "\n".join(parts)
    return text.replace(str(HERE.parent), "qkv")  # module keys: no local paths in the output
