"""Debian's Chromium as Playwright drives the page here: the browser tests, the docs' picture
of the page and the repaint benchmarks launch it through ``chromium`` (``playwright install``
downloads a browser, which these machines cannot)."""

from __future__ import annotations

import shutil
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)


def missing() -> str | None:
    """Why Chromium cannot start here, or None when it can."""
    if Path(CHROMIUM).exists() or shutil.which("chromium"):
        return None
    return f"{CHROMIUM} is missing (apt-get install -y chromium, or make chromium)"


def chromium(playwright):
    """A headless Chromium launched by a running ``sync_playwright()`` (close it when done)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=list(FLAGS))
