"""bundle.py joins the import graph of widget.js (the page's render.js, dom.js, …) into one
ES module; forms it cannot join are errors naming the file."""

from __future__ import annotations

import pytest

from qkv.notebook import bundle


def test_the_widget_graph_holds_the_pages_render_modules():
    names = [p.name for p, _ in bundle.graph()]
    assert names[-1] == "widget.js"
    assert {
        "panels.js",
        "render.js",
        "dom.js",
        "formula.js",
        "heatmap.js",
        "diagram.js",
        "mix.js",
    } <= set(names)
    assert len(names) == len(set(names))  # each module once
    assert names.index("dom.js") < names.index("render.js")  # dependencies first
    # the widget draws only: nothing that fetches or drives the page comes along
    assert not {"api.js", "app.js", "mode.js", "model.js", "predict.js", "practice.js"} & set(names)
    text = bundle.esm()
    assert text.rstrip().endswith("export default qkvWidget;")
    assert not [line for line in text.splitlines() if line.lstrip().startswith("import ")]
    assert "/work/" not in text and str(bundle.HERE) not in text  # no local paths inside
    assert '<div id="heatmap"' in text  # the page's panels, from panels.js
    assert "/* web/static/views.css */" in text  # and every stylesheet index.html links


def write(tmp_path, files: dict[str, str]):
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    return tmp_path / "entry.js"


def test_joined_exports_and_imports(tmp_path):
    entry = write(
        tmp_path,
        {
            "a.js": "export const one = 1;\nfunction two() { return 2; }\nexport { two as deux };\n",
            "entry.js": 'import { one, deux as two } from "./a.js";\nimport * as a from "./a.js";\n'
            'export { one as uno } from "./a.js";\n'
            "export function render() { return one + two() + a.one; }\n",
        },
    )
    graph = bundle.graph(entry)
    assert [p.name for p, _ in graph] == ["a.js", "entry.js"]
    assert 'return { "one": one, "deux": two };' in graph[0][1]
    assert "const { one, deux: two } = __mods[" in graph[1][1]
    assert '"uno": __mods[' in graph[1][1] and '.js"]["one"]' in graph[1][1]


@pytest.mark.parametrize(
    "files, message",
    [
        ({"entry.js": 'import x from "lodash";\n'}, "only relative imports"),
        ({"entry.js": 'import { a } from "./missing.js";\n'}, "not a file"),
        ({"entry.js": 'import "./b.js";\n', "b.js": 'import "./entry.js";\n'}, "import cycle"),
        ({"entry.js": 'export * from "./b.js";\n', "b.js": ""}, "cannot bundle"),
        ({"entry.js": 'const m = await import("./b.js");\n', "b.js": ""}, "cannot bundle"),
    ],
)
def test_forms_it_cannot_join_are_errors(tmp_path, files, message):
    with pytest.raises(bundle.BundleError, match=message):
        bundle.graph(write(tmp_path, files))
