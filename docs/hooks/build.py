"""mkdocs hooks for qkv's site.

- The helpers beside this file (``figures``) become importable, so the ``python exec="on"``
  blocks of the pages can draw with them.
- ``cli.md``'s marker line becomes every command's ``--help`` (``cli_reference.markdown()``),
  as Markdown headings, so they are in the page's contents, its anchors and the search.
- After the build, the interactive panels of one scene are written into the site as a
  self-contained HTML file (``qkv.presets.load("bank").to_html``), which ``page.md`` shows.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CLI_PAGE = "cli.md"
CLI_MARKER = "<!-- every command's --help, written here by docs/hooks/build.py -->"

# where page.md finds the exported panels, relative to the site's root
EMBEDS = {
    "assets/page/bank.html": ("bank", {"select": "bank", "temperatures": [0.25, 0.5, 1, 2, 4]}),
}


def on_config(config, **kwargs):
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    return config


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    if page.file.src_uri != CLI_PAGE:
        return markdown
    if CLI_MARKER not in markdown:
        raise ValueError(f"{CLI_PAGE} must hold the line {CLI_MARKER!r}")
    import cli_reference

    return markdown.replace(CLI_MARKER, cli_reference.markdown())


def on_post_build(config, **kwargs) -> None:
    import qkv

    for where, (preset, options) in EMBEDS.items():
        path = Path(config["site_dir"]) / where
        path.parent.mkdir(parents=True, exist_ok=True)
        qkv.presets.load(preset).to_html(path, **options)
