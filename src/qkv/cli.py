"""The ``qkv`` command."""

from __future__ import annotations

import argparse
import sys

from qkv import presets
from qkv.explain import render_plain, walkthrough


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="qkv", description="Walk through query-key-value attention on a built-in scene.",
        epilog="example: qkv --preset two-token --select subject")
    parser.add_argument("--preset", default=presets.DEFAULT,
                        help=f"scene to explain, one of {presets.names()} (default: %(default)s)")
    parser.add_argument("--select", default=None, help="query token (text or index)")
    args = parser.parse_args(argv)
    try:
        scene = presets.load(args.preset)
        sel = args.select
        i = scene.select if sel is None else scene.index(int(sel) if sel.isdigit() else sel)
    except ValueError as e:
        parser.exit(2, f"qkv: error: {e}\n")
    trace = scene.trace()
    print(f"{scene.title}: {scene.lesson}\n")
    print(render_plain(walkthrough(trace, i)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
