"""The page's model mode in Debian's Chromium on a 2,048-token text: a trace job with its
progress bar, the zooming heatmap of one head from its max-pooled overview down to labelled
cells, a query selected by clicking its row, and a token search — each drawn number checked
against float64 softmax of the model's own q and k."""

from __future__ import annotations

import re

import numpy as np
import pytest
from web_watch import watched_page
from zoom_reference import reference_weights

from qkv.bench.trace import text_of
from qkv.explain.tokens import labels

ML, MT, SIZE = 96, 84, 560  # zoom.js: the heatmap's margins and plot size (CSS px)
ROOT = "document.querySelector('#zoom-root').zoom"


@pytest.mark.slow
def test_the_page_traces_2048_tokens_zooms_and_selects_a_query(browser, model_server_url, smollm2):
    text = text_of(smollm2, 2048)
    ids, tokens = smollm2.encode(text)
    names = labels(tokens, len(tokens))
    prefix = text_of(smollm2, 160)  # causal: the first 160 rows need only these tokens
    assert smollm2.encode(prefix)[0] == ids[:160]
    want = reference_weights(smollm2.trace(prefix, layers=[0]).layer(0), 4, slice(0, 160))

    with watched_page(browser, height=1600) as (page, watch):
        page.goto(f"{model_server_url}/?mode=model&model=smollm2-135m&layer=0&head=4")
        page.wait_for_function("() => Number(document.body.dataset.modelRenders || 0) >= 1",
                               timeout=300_000)  # fmt: skip
        page.fill("#model-text", text)
        page.click("#model-run")
        page.wait_for_function(  # the progress bar counts the layers
            "() => /layer \\d+ of 30 \\(2,048 tokens\\)/.test("
            "document.querySelector('#trace-said').textContent)",
            timeout=300_000,
        )
        assert page.locator("#trace-progress").is_visible()
        page.wait_for_function("() => Number(document.body.dataset.modelRenders) >= 2",
                               timeout=300_000)  # fmt: skip
        page.wait_for_function(f"() => {ROOT}?.state.redraws > 0")
        assert page.evaluate("document.body.dataset.long") == "true"
        assert page.locator("#panel-x").is_hidden()  # the panels that print every number
        assert "2,048 tokens" in page.inner_text("#zoom-note")
        legend = page.inner_text("#zoom-root .zoom-legend")
        assert "max-pooled" in legend and "8 queries × 8 keys" in legend  # 2,048 / 256

        # zoom: the wheel near the top left, then + on the keyboard, down to labelled cells
        box = page.locator("#zoom-root .zoom-main").bounding_box()
        page.mouse.move(box["x"] + ML + 0.05 * SIZE, box["y"] + MT + 0.05 * SIZE)
        for _ in range(4):
            page.mouse.wheel(0, -300)
        page.wait_for_function(f"() => {ROOT}.state.view[1] - {ROOT}.state.view[0] < 700")
        page.evaluate(f"() => {ROOT}.show(100, 116, 92, 108)")  # then a 16 × 16 region
        page.focus("#zoom-root .zoom-main")
        page.keyboard.press("+")  # 8 × 8 around its centre
        page.wait_for_function(f"() => {ROOT}.state.drawn.numbers > 0", timeout=60_000)
        drawn = page.evaluate(f"() => {ROOT}.state.drawn")
        r0, r1, c0, c1 = drawn["view"]
        assert (r0, r1, c0, c1) == (104, 112, 96, 104)
        assert drawn["rows"] == names[104:112] and drawn["keys"] == names[96:104]
        assert drawn["numbers"] == 64
        cells = np.array(drawn["cells"])
        np.testing.assert_allclose(
            cells[:, 2], want[cells[:, 0].astype(int), cells[:, 1].astype(int)], atol=2e-6
        )
        assert "exact numbers" in page.inner_text("#zoom-root .zoom-where")

        # select query 109 by clicking its row: the strip names its heaviest keys
        page.mouse.click(box["x"] + ML + SIZE / 2, box["y"] + MT + (109 - 104 + 0.5) * SIZE / 8)
        page.wait_for_function(
            "() => /position 109\\)/.test(document.querySelector('.zoom-row-title').textContent)"
        )
        page.wait_for_function(f"() => {ROOT}.state.rowData?.header.q === 109")
        top = page.eval_on_selector_all(
            ".zoom-top-keys .zoom-key", "els => els.map(e => Number(e.dataset.index))"
        )
        assert top == np.argsort(-want[109], kind="stable")[:8].tolist()
        assert re.search(r"[?&]token=109\b", page.url)

        # a token search lists where " box" is
        page.fill(".zoom-search-text", "box")
        page.press(".zoom-search-text", "Enter")
        page.wait_for_function("() => document.querySelectorAll('.zoom-hit').length > 0")
        found = [j for j, t in enumerate(tokens) if "box" in t.lower()]
        said = page.inner_text(".zoom-search-said")
        assert said.startswith(f"{len(found)} matches")
        hits = page.eval_on_selector_all(
            ".zoom-hit", "els => els.map(e => Number(e.dataset.index))"
        )
        assert hits == found[: len(hits)]

        # the grid's thumbnails, pooled to 64 × 64 a head when asked for
        assert page.locator("#grid button.thumb").count() == 0
        page.click("#grid-pool")
        page.wait_for_function(
            "() => document.querySelectorAll('#grid button.thumb').length === 270",
            timeout=300_000,
        )
        assert page.locator("#grid button.thumb canvas").first.get_attribute("width") == "64"
        assert watch.errors == [], watch.errors  # named here; watched_page checks it too
