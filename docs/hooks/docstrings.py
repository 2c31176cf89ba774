"""A griffe extension: qkv's docstrings, written for ``help()``, laid out for the API reference.

qkv's docstrings give one argument per line as ``name: what it is`` and wrap at 100 columns.
Markdown would join those lines into one paragraph; here a line that starts with the names of
the function's own parameters (or a class's) starts a list item, its continuation lines stay
with it, and a ``Returns …``/``Raises …`` line starts a paragraph again. Nothing else changes:
the formulas, shapes and words are the docstring's own.
"""

from __future__ import annotations

import re

import griffe

# "mask:", "context (..., S, d_model):", "mask, causal, scale (default 1/√d_head), tau:"
_NAME = r"[A-Za-z_]\w*(?:\s*\([^()]*\))?"
ENTRY = re.compile(rf"^(?P<label>{_NAME}(?:,\s*{_NAME})*):\s+(?P<text>\S.*)$")
PARAGRAPH = ("Returns", "Raises", "Yields")


def _starts_entry(line: str, names: set[str]) -> re.Match | None:
    m = ENTRY.match(line)
    if m is None:
        return None
    labels = [re.match(r"\w+", part.strip())[0] for part in re.split(r",(?![^()]*\))", m["label"])]
    return m if all(label in names for label in labels) else None


def lay_out(text: str, names: set[str]) -> str:
    """``text`` with each unindented ``name: …`` line (``name`` in ``names``) a list item."""
    out: list[str] = []
    in_item = False
    for line in text.splitlines():
        m = _starts_entry(line, names)
        if m:
            if out and out[-1].strip() and not in_item:
                out.append("")  # a list needs a blank line after a paragraph
            out.append(f"- **{m['label']}**: {m['text']}")
            in_item = True
        elif not line.strip():
            out.append(line)
            in_item = False
        elif in_item and not line.startswith((" ", *PARAGRAPH)):
            out.append(f"  {line}")  # the item goes on
        else:
            if in_item:
                out.append("")
                in_item = False
            out.append(line)
    return "\n".join(out)


def parameter_names(obj: griffe.Object) -> set[str]:
    """The names a docstring's argument lines may start with: a function's parameters; a
    class's constructor parameters and attributes."""
    if isinstance(obj, griffe.Function):
        return {p.name for p in obj.parameters}
    if isinstance(obj, griffe.Class):
        names = {p.name for p in obj.parameters} if hasattr(obj, "parameters") else set()
        return names | {n for n, m in obj.members.items() if m.is_attribute}
    return set()


class ArgumentLines(griffe.Extension):
    """Applies ``lay_out`` to the docstrings of functions and classes."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        names = parameter_names(obj)
        if obj.docstring is not None and names:
            obj.docstring.value = lay_out(obj.docstring.value, names)
