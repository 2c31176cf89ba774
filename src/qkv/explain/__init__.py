"""Words and pictures of a trace: the walkthrough, text/Markdown/rich formats, heatmaps, the
notebook HTML, the built-in scenes and the sizes of a configuration (``dims``)."""

from qkv import display


def _drawing(name: str):
    def draw(obj) -> str:
        from qkv.explain import html  # matplotlib-free, loaded on first display

        return getattr(html, name)(obj)

    return draw


display.register_static("trace", lambda tr: _drawing("render")(tr.numpy()))
display.register_static("scene", _drawing("scene"))
display.register_static("run", _drawing("model_run"))
