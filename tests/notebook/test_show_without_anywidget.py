"""qkv.show where the notebook extra is not installed: an ImportError naming the extra, as the
command line names it, not a bare ModuleNotFoundError."""

from __future__ import annotations

import sys

import pytest

import qkv


@pytest.mark.parametrize("package", ["anywidget", "traitlets"])
def test_show_without_the_extra_names_it(monkeypatch, package):
    monkeypatch.delitem(sys.modules, "qkv.notebook.widget", raising=False)
    monkeypatch.setitem(sys.modules, package, None)  # import then fails as for a missing one
    with pytest.raises(ModuleNotFoundError) as e:
        qkv.show(qkv.presets.load("cat-sat"))
    assert str(e.value) == (
        f"qkv.show needs the Python package {package!r}, which is not installed: "
        "pip install 'qkv[notebook]'"
    )
    assert e.value.name == package


def test_another_missing_module_is_not_blamed_on_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "qkv.notebook.widget", None)  # a bug, not an extra
    with pytest.raises(ModuleNotFoundError) as e:
        qkv.show(qkv.presets.load("cat-sat"))
    assert "qkv[notebook]" not in str(e.value)
