"""Slider move → repaint time of the simulator page in Chromium (a benchmark, not a test).

Starts ``python -m qkv.web`` on a free port of 127.0.0.1, opens the page in Debian's Chromium
(Playwright), then moves the τ slider N times. For each move it times, inside the page with
``performance.now()``: the input event → the API answer painted into the DOM (``rendered``), and
→ the next frame after that (``painted``: requestAnimationFrame, then a task after it, when the
frame has been produced), and the part of it spent in the page's render(). Reports medians and
90th percentiles in milliseconds.

    .venv/bin/python benchmarks/web_repaint.py [--moves 200] [--preset cat-sat]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys

MOVE = """async (position) => {
  const slider = document.getElementById("tau");
  const before = Number(document.body.dataset.renders);
  const t0 = performance.now();
  const rendered = new Promise((resolve) => {
    const watch = new MutationObserver(() => {
      if (Number(document.body.dataset.renders) > before) {
        watch.disconnect();
        resolve(performance.now());
      }
    });
    watch.observe(document.body, { attributes: true, attributeFilter: ["data-renders"] });
  });
  slider.value = String(position);
  slider.dispatchEvent(new Event("input", { bubbles: true }));
  const t1 = await rendered;
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  return [t1 - t0, performance.now() - t0, Number(document.body.dataset.renderMs)];
}"""


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=200)
    ap.add_argument("--preset", default="cat-sat")
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args(argv)

    from playwright.sync_api import sync_playwright

    from qkv.web.browser import chromium

    server = subprocess.Popen(
        [sys.executable, "-m", "qkv.web", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        url = re.search(r"http://\S+", server.stdout.readline()).group(0)
        with sync_playwright() as p:
            browser = chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{url}?preset={args.preset}")
            page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
            positions = [(137 * n) % 1001 for n in range(1, args.warmup + args.moves + 1)]
            times = [page.evaluate(MOVE, pos) for pos in positions]
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    times = times[args.warmup :]
    rendered = [t[0] for t in times]
    painted = [t[1] for t in times]
    js = [t[2] for t in times]
    print(
        f"qkv simulator, preset {args.preset}, {args.moves} τ-slider moves in Chromium "
        f"(after {args.warmup} warm-up moves)"
    )
    print(
        f"  input → DOM updated : median {statistics.median(rendered):6.2f} ms, "
        f"p90 {pct(rendered, 0.9):6.2f} ms"
    )
    print(f"    of which render() : median {statistics.median(js):6.2f} ms (building the DOM)")
    print(
        f"  input → next frame  : median {statistics.median(painted):6.2f} ms, "
        f"p90 {pct(painted, 0.9):6.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
