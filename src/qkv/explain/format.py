"""Sections of titled text and tables, and how they print: plain text, Markdown, or a rich console.

``explain`` and ``dims`` build their narratives as ``Section`` objects; the terminal, the web page
and the docs render the same sections, so the words and numbers are written once.

A section keeps ``lines`` (its whole body as plain text, tables included, aligned) for callers that
only want text, and ``blocks`` (strings and ``Table`` objects in order) for renderers that draw
real tables. A ``Formula`` block is a line of worked arithmetic: plain text prints it as it is,
Markdown sets it as code so that its symbols (``*``, ``_``, ``[…]``) stay literal; any other
line is prose, escaped for Markdown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Table:
    """A small table: a header row and rows of already formatted cells (first column = row name)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    highlight: int | None = None  # a row to stand out (the selected query, the strongest key)

    def __post_init__(self):
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(
                    f"every row needs {len(self.columns)} cells to match the columns "
                    f"{self.columns}, got {len(row)}: {row}"
                )

    def text_lines(self) -> list[str]:
        """The table as aligned text: names left-aligned, numbers right-aligned."""
        grid = [self.columns, *self.rows]
        widths = [max(len(r[c]) for r in grid) for c in range(len(self.columns))]
        out = []
        for r in grid:
            cells = [r[0].ljust(widths[0])] + [r[c].rjust(widths[c]) for c in range(1, len(r))]
            out.append("  ".join(cells).rstrip())
        return out


class Formula(str):
    """A line of worked arithmetic ("z[0] = 0.13 + 0.02 = 0.15"): a str, set as code in Markdown."""

    __slots__ = ()


Block = str | Table  # a line of prose, a Formula (a str) or a table


@dataclass(frozen=True)
class Section:
    """One step of a narrative: a title and its body (see the module docstring)."""

    title: str
    lines: tuple[str, ...]
    blocks: tuple[Block, ...] = field(default=())  # in order; () means "just the lines"


def section(title: str, *blocks: Block) -> Section:
    """A Section from text lines and tables in order; ``lines`` is filled from them."""
    lines: list[str] = []
    for b in blocks:
        lines.extend(b.text_lines() if isinstance(b, Table) else [b])
    return Section(title, tuple(lines), tuple(blocks))


def _blocks(sec: Section) -> tuple[Block, ...]:
    return sec.blocks if sec.blocks else sec.lines


def render_plain(sections: list[Section]) -> str:
    """Sections as plain text: the title, then the body indented by two spaces."""
    out = []
    for sec in sections:
        out.append(sec.title)
        out.extend("  " + line for line in sec.lines)
        out.append("")
    return "\n".join(out)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|~])")


def md_text(text: str, *, line: bool = True) -> str:
    """Text escaped for Markdown: its punctuation prints literally ("___" stays three
    underscores, "x[0]" is no link); as a line of its own (``line``) it also loses its indent and
    a leading "-", "+", "=" or "1." starts no list or heading."""
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return re.sub(r"^([-+=]|\d+[.)])", r"\\\1", text.strip()) if line else text


def _md_row(cells) -> str:
    return "| " + " | ".join(md_text(c, line=False) if c else " " for c in cells) + " |"


def _fence(lines: list[str]) -> list[str]:
    """Lines as a fenced code block whose fence is longer than any run of backticks in them."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "text", *lines, fence]


def render_markdown(sections: list[Section], *, heading: str = "##") -> str:
    """Sections as Markdown: a heading each, prose as escaped paragraphs, runs of ``Formula``
    lines as one code block, tables as pipe tables (names left, numbers right)."""
    out: list[str] = []

    def gap():
        if out and out[-1] != "":
            out.append("")

    for sec in sections:
        out += [f"{heading} {md_text(sec.title, line=False)}", ""]
        formulas: list[str] = []
        for b in (*_blocks(sec), None):
            if isinstance(b, Formula):
                formulas.append(b)
                continue
            if formulas:
                gap()
                out += _fence(formulas)
                formulas = []
            if b is None:
                break
            gap()
            if isinstance(b, Table):
                out.append(_md_row(b.columns))
                out.append("|" + "|".join([":---"] + ["---:"] * (len(b.columns) - 1)) + "|")
                out += [_md_row(r) for r in b.rows]
            elif b:
                out.append(md_text(b))
        gap()
    return "\n".join(out)


def render_rich(sections: list[Section], console=None) -> None:
    """Print sections to a rich console: bold titles, boxed tables. rich drops the colour codes
    by itself when the output is not a terminal."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.table import Table as RichTable
    from rich.text import Text

    console = console or Console()
    for sec in sections:
        console.print(Text(sec.title, style="bold cyan"))
        for b in _blocks(sec):
            if isinstance(b, Table):
                t = RichTable(
                    show_header=True, header_style="bold", box=None, padding=(0, 1), pad_edge=False
                )
                for c, name in enumerate(b.columns):
                    t.add_column(
                        Text(name),
                        justify="left" if c == 0 else "right",
                        style="magenta" if c == 0 else None,
                        no_wrap=True,
                    )
                for n, r in enumerate(b.rows):
                    t.add_row(*map(Text, r), style="bold yellow" if n == b.highlight else None)
                console.print(Padding(t, (0, 0, 0, 2), expand=False))
            else:
                console.print(Text("  " + b), soft_wrap=True)
        console.print()
