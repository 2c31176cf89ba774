"""The notebook surface: ``show`` (an anywidget widget of the simulator's panels) and
``to_html`` (one self-contained HTML file of them). ``show`` needs the ``notebook`` extra
(anywidget); this package's other modules do not."""

from __future__ import annotations

from qkv import display


def show(obj, **kwargs):
    """``qkv.notebook.widget.show``: imported on first use, so anywidget loads only then."""
    from qkv.notebook.widget import show as _show

    return _show(obj, **kwargs)


def to_html(obj, path=None, **kwargs) -> str:
    """``qkv.notebook.export.to_html``: one self-contained HTML file of the panels."""
    from qkv.notebook.export import to_html as _to_html

    return _to_html(obj, path, **kwargs)


display.register_exporter(to_html)
