"""The command-line page's reference: every ``qkv`` command's ``--help``, as click prints it.

``docs/cli.md`` prints ``markdown()`` at build time, so the page cannot drift from the CLI: a
new command, option or example appears on the next build.
"""

from __future__ import annotations

import click

from qkv.cli import main

WIDTH = 100  # columns, as the qkv group's own max_content_width


def commands(group: click.Group = main, ctx: click.Context | None = None):
    """(context, command) for every command under ``group``, sub-commands after their group,
    in the order ``qkv --help`` lists them."""
    if ctx is None:
        ctx = click.Context(group, info_name="qkv", terminal_width=WIDTH, max_content_width=WIDTH)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        sub = click.Context(command, info_name=name, parent=ctx)
        yield sub, command
        if isinstance(command, click.Group):
            yield from commands(command, sub)


def markdown(heading: str = "##") -> str:
    """A summary table, then a heading ``qkv NAME`` and the help text for each command."""
    found = list(commands())
    rows = ["| command | what it does |", "|---|---|"]
    for ctx, command in found:
        anchor = ctx.command_path.replace(" ", "-")
        summary = command.get_short_help_str(limit=90).replace("|", "\\|")
        rows.append(f"| [`{ctx.command_path}`](#{anchor}) | {summary} |")
    parts = ["\n".join(rows)]
    for ctx, command in found:
        depth = ctx.command_path.count(" ")  # qkv explain: 1, qkv lab train: 2
        level = heading + "#" * (depth - 1)
        text = command.get_help(ctx)
        parts.append(f"{level} {ctx.command_path}\n\n```text\n{text}\n```")
    return "\n\n".join(parts) + "\n"
