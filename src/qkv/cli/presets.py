"""``qkv presets``: the built-in scenes and what each one teaches."""

from __future__ import annotations

import json
from typing import Any

import click

from qkv.cli.common import echo_sections, format_option
from qkv.explain import scenes


@click.command()
@format_option()
def presets(fmt):
    """List the built-in scenes with their one-line lessons.

    \b
    Examples:
      qkv presets
      qkv presets --format json
      qkv explain --preset bank      (then walk through one)
    """
    rows: list[dict[str, Any]] = []  # one JSON object per scene
    for name in scenes.names():
        s = scenes.load(name)
        rows.append(
            {
                "name": name,
                "title": s.title,
                "lesson": s.lesson,
                "tokens": list(s.tokens),
                "select": s.tokens[s.select],
                "n_heads": s.n_heads or 1,
                "default": name == scenes.DEFAULT,
            }
        )
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    from qkv.explain.format import Section, Table, section

    table = Table(
        ("name", "heads", "tokens", "query"),
        tuple(
            (
                r["name"] + (" (default)" if r["default"] else ""),
                str(r["n_heads"]),
                " ".join(r["tokens"]),
                r["select"],
            )
            for r in rows
        ),
    )
    lessons = Section("what each one teaches", tuple(f"{r['name']}: {r['lesson']}" for r in rows))
    usage = Section("try", ("qkv explain --preset NAME [--select TOKEN]",))
    echo_sections([section("built-in scenes", table), lessons, usage], fmt)
