"""The notebook surface: ``show`` (an anywidget widget of the simulator's panels) and
``to_html`` (one self-contained HTML file of them). ``show`` needs the ``notebook`` extra
(anywidget); this package's other modules do not."""

from __future__ import annotations

from qkv import display


def show(obj, **kwargs):
    """``qkv.notebook.widget.show``: imported on first use, so anywidget loads only then; a
    ModuleNotFoundError naming the extra when anywidget (or its traitlets) is not installed."""
    try:
        from qkv.notebook.widget import show as _show
    except ModuleNotFoundError as e:
        missing = (e.name or "").split(".")[0]
        if missing not in ("anywidget", "traitlets"):
            raise
        raise ModuleNotFoundError(
            f"qkv.show needs the Python package {missing!r}, which is not installed: "
            f"pip install 'qkv[notebook]'",
            name=missing,
        ) from e
    return _show(obj, **kwargs)


def to_html(obj, path=None, **kwargs) -> str:
    """``qkv.notebook.export.to_html``: one self-contained HTML file of the panels."""
    from qkv.notebook.export import to_html as _to_html

    return _to_html(obj, path, **kwargs)


display.register_exporter(to_html)
