"""The picture of the page that README.md and page.md show: ``docs/assets/page.png``.

    python docs/hooks/page_picture.py        # after a change to the page; needs the web extra,
                                             # Playwright for Python and /usr/bin/chromium

Starts the simulator on a free port of 127.0.0.1, opens the default scene with the query
``sat`` in Debian's Chromium (Playwright; ``playwright install`` is not used), waits for the
first render, and saves the page's header (the controls) above its ``scores → … → weights``
heatmaps and the selected query's weights, 1280 CSS pixels wide, as a 256-colour PNG.
"""

from __future__ import annotations

import io
import sys
import threading
import time
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "assets" / "page.png"
VIEW = {"width": 1280, "height": 900}
QUERY = "/?preset=cat-sat&token=2"
# the parts of the page shown, top to bottom: the controls, then the heatmaps beside the weights
PARTS = ("body > header", "#panel-pipeline, #panel-weights")
PAD = 12  # CSS pixels kept around each part


def shoot(out: Path = OUT) -> int:
    """Write the picture to ``out``; returns its size in bytes."""
    import uvicorn
    from PIL import Image
    from playwright.sync_api import sync_playwright

    from qkv.web.app import create_app
    from qkv.web.browser import chromium
    from qkv.web.server import bind, url_of

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the simulator's server did not start within 20 s")
        time.sleep(0.05)
    try:
        with sync_playwright() as p:
            browser = chromium(p)
            page = browser.new_page(viewport=VIEW)
            page.goto(url_of(sock).rstrip("/") + QUERY)
            page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
            png = page.screenshot(full_page=True)
            spans = [_span(page, selector) for selector in PARTS]
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    full = Image.open(io.BytesIO(png)).convert("RGB")
    strips = [full.crop((0, top, full.width, bottom)) for top, bottom in _merged(spans)]
    image = Image.new("RGB", (full.width, sum(s.height for s in strips)), "white")
    y = 0
    for strip in strips:
        image.paste(strip, (0, y))
        y += strip.height
    image = image.quantize(256)
    out.parent.mkdir(parents=True, exist_ok=True)
    image.save(out, optimize=True)
    return out.stat().st_size


def _span(page, selector: str) -> tuple[int, int]:
    """(top, bottom) in page pixels of the elements ``selector`` matches, padded."""
    top, bottom = page.evaluate(
        """(sel) => {
            const boxes = [...document.querySelectorAll(sel)].map((e) => e.getBoundingClientRect());
            return [Math.min(...boxes.map((b) => b.top)) + scrollY,
                    Math.max(...boxes.map((b) => b.bottom)) + scrollY];
        }""",
        selector,
    )
    return max(0, int(top) - PAD), int(bottom) + PAD


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans in page order, overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for top, bottom in sorted(spans):
        if out and top <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], bottom))
        else:
            out.append((top, bottom))
    return out


if __name__ == "__main__":
    size = shoot(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
    print(f"wrote {OUT if len(sys.argv) < 2 else sys.argv[1]} ({size:,} bytes)")
