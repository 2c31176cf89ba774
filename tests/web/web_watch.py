"""A Chromium page whose every request and console error is watched: requests that would leave
127.0.0.1 are aborted and recorded, and the page must end with neither."""

from __future__ import annotations

from contextlib import contextmanager
from urllib.parse import urlsplit


class Watch:
    """Everything the page asked for and every console error it printed."""

    def __init__(self):
        self.urls: list[str] = []
        self.blocked: list[str] = []
        self.errors: list[str] = []

    def route(self, route):
        url = route.request.url
        self.urls.append(url)
        if urlsplit(url).hostname == "127.0.0.1" or url.startswith("data:"):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()

    def traces(self) -> int:
        return sum(u.endswith("/api/trace") for u in self.urls)


@contextmanager
def watched_page(browser, *, width: int = 1400, height: int = 900, **options):
    """(page, watch) in a fresh browser context (options: more of ``browser.new_context``'s, such
    as has_touch=True); on exit, no console error and no request off 127.0.0.1 may have happened
    (a test that provokes an error removes it from watch.errors)."""
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    watch = Watch()
    context.route("**/*", watch.route)
    page = context.new_page()
    page.on("console", lambda m: watch.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: watch.errors.append(f"{e}\n{e.stack}"))
    yield page, watch
    context.close()
    assert watch.errors == [], f"console errors: {watch.errors}"
    assert watch.blocked == [], "requests that would have left 127.0.0.1"


def renders(page) -> int:
    """How many times the page has painted an answer (body's data-renders)."""
    return int(page.evaluate("() => Number(document.body.dataset.renders)"))


def wait_render(page, before: int):
    """Wait until the page paints again after ``before`` renders."""
    page.wait_for_function("(n) => Number(document.body.dataset.renders) > n", arg=before)


def edit_x(page, i: int, j: int, text: str):
    """Type ``text`` into X's cell (i, j), leave it, wait for the new answer's paint; the cell."""
    before = renders(page)
    cell = page.locator(f'#x-editor input[aria-label="x[{i}][{j}]"]')
    cell.fill(text)
    cell.press("Tab")
    wait_render(page, before)
    return cell
