"""The page's zooming heatmap at a long text, in Chromium (a benchmark, not a test): the bytes the
page fetches for its first state and for each change, and the time each redraw takes.

Loads SmolLM2, serves the app on a free port of 127.0.0.1 (uvicorn, in this process), opens the
page's model mode in Debian's Chromium (Playwright), traces a text of --tokens tokens
(``qkv.bench.trace.text_of``), waits for the heatmap, then asks for the grid's thumbnails (the
page pools them when asked) and waits for them. Bytes: the sizes of the page's /api/ answers (the
Resource Timing API's encodedBodySize, plus the job polls) from pressing "run" to the heatmap
drawn, then for the thumbnails, then for each change: τ, layer, head, query, zoom.
Redraws: --moves wheel zooms and arrow-key pans at the pointer; zoom.js times each redraw
(performance.now() around drawing one view from its ImageData) and this prints the median and
90th percentile in milliseconds.

    PYTHONPATH=src .venv/bin/python benchmarks/zoom_redraw.py [--tokens 2048] [--moves 200]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from qkv import models
from qkv.bench.trace import text_of

ROOT = "document.querySelector('#zoom-root').zoom"
BYTES = """() => performance.getEntriesByType("resource")
  .filter((e) => e.name.includes("/api/")).map((e) => [e.name, e.encodedBodySize])"""


def serve(model):
    import uvicorn

    from qkv.web.app import create_app
    from qkv.web.models import ModelPool
    from qkv.web.server import bind, url_of

    app = create_app(model_pool=ModelPool(loaded={model.name: model}))
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return url_of(sock).rstrip("/")


def settle(page, seconds: float = 1.5) -> None:
    """Wait until no request has been made for ``seconds`` (the page's window requests are
    debounced)."""
    last = -1
    while True:
        n = page.evaluate("() => performance.getEntriesByType('resource').length")
        if n == last:
            return
        last = n
        time.sleep(seconds)


def change(page, act) -> int:
    """Bytes of the /api/ answers ``act()`` makes the page fetch."""
    before = len(page.evaluate(BYTES))
    act()
    settle(page)
    return sum(size for _, size in page.evaluate(BYTES)[before:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--moves", type=int, default=200)
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from qkv.web.browser import CHROMIUM, chromium

    model = models.load("smollm2-135m")
    text = text_of(model, args.tokens)
    url = serve(model)
    with sync_playwright() as p:
        browser = chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        page.goto(f"{url}/?mode=model&model=smollm2-135m&text=hi")
        page.wait_for_function("() => Number(document.body.dataset.modelRenders || 0) >= 1",
                               timeout=600_000)  # fmt: skip
        page.evaluate(
            "() => { performance.setResourceTimingBufferSize(1e6);"
            " performance.clearResourceTimings(); }"
        )
        page.fill("#model-text", text)
        t0 = time.perf_counter()
        page.click("#model-run")
        done = f"{args.tokens:,} tokens traced"
        page.wait_for_function(
            f"(done) => document.querySelector('#trace-said').textContent.includes(done) &&"
            f" {ROOT}?.state.redraws > 0",
            arg=done,
            timeout=1_800_000,
        )
        traced = time.perf_counter() - t0
        settle(page)
        first = sum(size for _, size in page.evaluate(BYTES))
        polls = sum(1 for name, _ in page.evaluate(BYTES) if "/api/model/jobs" in name)
        before, t0 = len(page.evaluate(BYTES)), time.perf_counter()
        page.click("#grid-pool")
        page.wait_for_function(
            "() => document.querySelectorAll('#grid button.thumb').length === 270",
            timeout=1_800_000,
        )
        pooling = time.perf_counter() - t0
        settle(page)
        grid = sum(size for _, size in page.evaluate(BYTES)[before:])
        box = page.locator("#zoom-root .zoom-main").bounding_box()
        x, y = box["x"] + 96, box["y"] + 84  # zoom.js's margins
        tau = "() => { const t = document.getElementById('zoom-tau'); t.value = '350';" \
              " t.dispatchEvent(new Event('change')); }"  # fmt: skip
        changes = {
            "zoom": lambda: [page.mouse.move(x + 300, y + 300), page.mouse.wheel(0, -600)],
            "tau": lambda: page.evaluate(tau),
            "layer": lambda: page.click('#grid button.thumb[data-layer="17"][data-head="0"]'),
            "head": lambda: page.click('#grid button.thumb[data-layer="17"][data-head="8"]'),
            "query": lambda: page.mouse.click(x + 200, y + 250),
        }
        sizes = {name: change(page, act) for name, act in changes.items()}
        page.evaluate(f"() => {{ {ROOT}.state.times.length = 0; }}")
        page.mouse.move(x + 280, y + 280)
        for i in range(args.moves):
            if i % 4 == 3:
                page.focus("#zoom-root .zoom-main")
                page.keyboard.press("ArrowRight" if i % 8 == 3 else "ArrowDown")
            else:
                page.mouse.wheel(0, -120 if (i // 20) % 2 == 0 else 120)
        settle(page, 0.5)
        times = page.evaluate(f"() => {ROOT}.state.times.slice()")
        browser.close()
    times.sort()
    print(f"SmolLM2, {args.tokens:,} tokens, Chromium {CHROMIUM} (--disable-gpu)")
    print(f"run → heatmap drawn: {traced:.1f} s; the grid's thumbnails asked → drawn: "
          f"{pooling:.1f} s (on this machine)")  # fmt: skip
    print(f"first state: {first:,} bytes of /api/ answers ({polls} job polls included); "
          f"the thumbnails: {grid:,} bytes")  # fmt: skip
    for name, size in sizes.items():
        print(f"change {name:<6}: {size:,} bytes")
    print(f"redraws: {len(times)}, median {statistics.median(times):.2f} ms, "
          f"90th percentile {times[int(0.9 * len(times))]:.2f} ms, max {times[-1]:.2f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
