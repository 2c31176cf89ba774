"""Run a ``qkv`` command while the site is built and show what it printed (and drew).

The pages print ``show("qkv lab scaling --png scaling.png")`` from a ``python exec="on"``
block: the command runs as a user would run it (the ``qkv`` first on ``PATH``: ``make docs``
puts the environment's ``bin/`` there), in a scratch directory, and the page gets a console
block of its output and, for each ``--png FILE`` it wrote, the picture inline. A command that
fails fails the build.
"""

from __future__ import annotations

import base64
import os
import shlex
import subprocess
import tempfile
from pathlib import Path


def show(command: str, *, alt: str = "", stdin: str | None = None) -> str:
    """Run ``command``; Markdown of a console block of its output, then every ``--png``
    picture it wrote (``alt`` describes it)."""
    args = shlex.split(command)
    parts = []
    with tempfile.TemporaryDirectory() as scratch:
        run = subprocess.run(
            args,
            cwd=scratch,
            input=stdin,
            capture_output=True,
            text=True,
            env=dict(os.environ, COLUMNS="110", MPLBACKEND="Agg"),
            timeout=600,
        )
        if run.returncode != 0:
            raise RuntimeError(f"{command} exited {run.returncode}:\n{run.stderr[-2000:]}")
        typed = None if stdin is None else stdin.encode("unicode_escape").decode()
        shown = command if stdin is None else f"printf '{typed}' | {command}"
        parts.append(f"```console\n$ {shown}\n{run.stdout.rstrip()}\n```\n")
        for i, word in enumerate(args[:-1]):
            if word == "--png":
                png = (Path(scratch) / args[i + 1]).read_bytes()
                data = base64.b64encode(png).decode()
                img = f'<img src="data:image/png;base64,{data}" alt="{alt}" style="width: 100%">'
                parts.append(img + "\n")
    return "\n".join(parts)
