"""The page's "real model" mode in Debian's Chromium: type a sentence, see the layers × heads
grid, click a head, read its weights back from the DOM and compare them with the model's trace."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from web_watch import watched_page

from qkv import models

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"  # gitignored; screenshots land here
TEXT = "A small dog ran to the park"


@pytest.fixture
def page(browser, model_server_url):
    with watched_page(browser) as (p, watch):
        p.console_errors = watch.errors  # a test that provokes a 4xx removes the browser's report
        yield p


def model_renders(page) -> int:
    return int(page.evaluate("() => Number(document.body.dataset.modelRenders || 0)"))


def wait_model_render(page, before: int):
    page.wait_for_function(
        "(n) => Number(document.body.dataset.modelRenders || 0) > n", arg=before, timeout=120_000
    )


def test_type_a_sentence_see_the_grid_click_a_head(page, model_server_url, smollm2):
    page.goto(model_server_url + "/")
    page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")  # scenes first
    page.click("#mode-model")
    wait_model_render(page, 0)  # the default sentence
    page.select_option("#model-name", "smollm2-135m")
    page.fill("#model-text", TEXT)
    before = model_renders(page)
    page.click("#model-run")
    wait_model_render(page, before)

    want = models.layer_trace("smollm2-135m", TEXT, layer=5, model=smollm2)
    L = len(want.tokens)
    thumbs = page.locator("#grid button.thumb")
    assert thumbs.count() == 30 * 9
    assert page.locator("#tokens .token").all_inner_texts() == [
        t.replace(" ", "␣") for t in want.tokens
    ]
    assert page.locator("#panel-w").is_hidden()  # no W editors for a real model
    assert "too wide to show" in page.inner_text("#x-editor")

    before = model_renders(page)
    page.click('#grid button.thumb[data-layer="5"][data-head="7"]')
    wait_model_render(page, before)
    assert (
        page.locator("#grid button.thumb.selected").get_attribute("aria-label") == "layer 5, head 7"
    )
    assert "layer 5, head 7 (K/V head 2)" in page.inner_text("#panel-qkv h2")

    # every row of the weights heatmap sums to 1, and equals the model's trace
    grid = np.array(
        page.eval_on_selector_all(
            "#heatmap tbody tr",
            "rows => rows.map(r => [...r.querySelectorAll('td')]"
            ".map(td => Number(td.dataset.value)))",
        )
    )
    assert grid.shape == (L, L)
    np.testing.assert_allclose(grid.sum(axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(grid, want["weights"][7], atol=1e-7)
    assert np.all(grid[np.triu_indices(L, 1)] == 0)  # causal: later keys get exactly 0
    bars = np.array(
        page.eval_on_selector_all("#bars .bar", "els => els.map(e => Number(e.dataset.weight))")
    )
    np.testing.assert_allclose(bars, want["weights"][7, L - 1], atol=1e-7)  # the last token
    assert page.inner_text("#weights-sum") == "1.000"

    query = parse_qs(urlsplit(page.url).query)
    assert query["mode"] == ["model"] and query["text"] == [TEXT]
    assert query["layer"] == ["5"] and query["head"] == ["7"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(ARTIFACTS / "web-model.png"), full_page=True)

    # back to the scenes: their panels return
    before = int(page.evaluate("() => Number(document.body.dataset.renders)"))
    page.click('#modes button[data-mode="scenes"]')
    page.wait_for_function("(n) => Number(document.body.dataset.renders) > n", arg=before)
    assert page.locator("#panel-grid").is_hidden() and page.locator("#panel-w").is_visible()
    assert page.locator("#tokens .token").all_inner_texts() == [
        "the",
        "cat",
        "sat",
        "on",
        "the",
        "mat",
    ]


def test_a_shared_url_opens_that_head_and_a_bad_one_falls_back(page, model_server_url, minilm):
    text = "The bank raised interest rates"
    page.goto(f"{model_server_url}/?mode=model&model=minilm-l6&text={text}&layer=2&head=5&token=2")
    wait_model_render(page, 0)
    assert page.locator("#controls").is_hidden()  # the scenes' controls give way
    assert page.locator("#tokens .token.selected").inner_text() == "bank"
    want = models.layer_trace("minilm-l6", text, layer=2, model=minilm)
    bars = np.array(
        page.eval_on_selector_all("#bars .bar", "els => els.map(e => Number(e.dataset.weight))")
    )
    np.testing.assert_allclose(bars, want["weights"][5, 2], atol=1e-7)

    page.goto(f"{model_server_url}/?mode=model&model=minilm-l6&text={text}&layer=99")
    wait_model_render(page, 0)
    assert "layer must be in [0, 6)" in page.inner_text("#error")
    assert "showing layer 0, head 0 instead" in page.inner_text("#error")
    assert (
        page.locator("#grid button.thumb.selected").get_attribute("aria-label") == "layer 0, head 0"
    )
    refused = "Failed to load resource: the server responded with a status of 422"
    assert [e for e in page.console_errors if e.startswith(refused)] != []
    page.console_errors[:] = [e for e in page.console_errors if not e.startswith(refused)]


def test_a_model_url_opens_the_model_even_when_its_script_comes_last(page, model_server_url):
    """The scenes' script may answer (and rewrite the URL with its own state) before the model
    mode's script has arrived; the URL's ?mode=model must still open the model."""
    held = []  # one of model.js's imports, kept back
    page.route("**/static/whatif.js", lambda route: held.append(route))
    text = "The bank raised interest rates"
    url = f"{model_server_url}/?mode=model&model=minilm-l6&text={text}"
    with page.expect_response(lambda r: r.url.endswith("/api/trace"), timeout=60_000):
        page.goto(url, wait_until="commit")  # until the scenes' answer has come
    for _ in range(600):  # and model.js has asked for its import (at most 30 s)
        if held:
            break
        page.wait_for_timeout(50)
    page.wait_for_timeout(500)  # longer than the scenes' URL writer waits after a paint
    assert len(held) == 1
    held[0].continue_()
    wait_model_render(page, 0)
    query = parse_qs(urlsplit(page.url).query)
    assert query["mode"] == ["model"] and query["text"] == [text]
    assert page.locator("#controls").is_hidden()


@pytest.mark.parametrize("missing", ["model.js", "whatif.js"])
def test_a_model_view_that_cannot_load_says_so(page, model_server_url, missing):
    """model.js, or one of its imports, does not arrive: the page says so where its errors go,
    instead of staying blank."""
    page.route(f"**/static/{missing}", lambda route: route.fulfill(status=404, body="gone"))
    page.goto(f"{model_server_url}/?mode=model&model=minilm-l6")
    box = page.locator("#error")
    box.wait_for(state="visible", timeout=30_000)
    assert "could not load" in box.inner_text() and "model.js" in box.inner_text()
    refused = "Failed to load resource: the server responded with a status of 404"
    assert [e for e in page.console_errors if e.startswith(refused)] != []
    page.console_errors[:] = [e for e in page.console_errors if not e.startswith(refused)]


def test_the_scenes_run_without_the_model_view(page, model_server_url):
    """Without ?mode=model a model.js that does not arrive leaves the scenes as they are: they
    paint, and the error line is never shown, not even for a moment."""
    page.route("**/static/model.js", lambda route: route.fulfill(status=404, body="gone"))
    page.add_init_script(
        """document.addEventListener("DOMContentLoaded", () => {
          const box = document.getElementById("error");  // module scripts have run by now
          const look = () => { if (!box.hidden) window.errorShown = box.textContent; };
          look();
          new MutationObserver(look).observe(box, {attributes: true, childList: true});
        });"""
    )
    page.goto(model_server_url + "/")
    page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
    page.wait_for_timeout(300)
    assert page.locator("#error").is_hidden()
    assert page.evaluate("() => window.errorShown") is None
    refused = "Failed to load resource: the server responded with a status of 404"
    page.console_errors[:] = [e for e in page.console_errors if not e.startswith(refused)]
