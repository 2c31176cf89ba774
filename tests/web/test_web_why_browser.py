"""The "why this token?" panel in Debian's Chromium: on the page in model mode (SmolLM2 on an
indirect-object sentence), a click on a head shows its share split by key with the tokens'
labels and selects it in the page's grid; an exported file draws the same panel offline."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from web_watch import watched_page

from qkv import models
from qkv.explain.tokens import labels

pytest.importorskip("transformers", reason="the panel needs the hf extra (pip install 'qkv[hf]')")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"  # gitignored; screenshots land here
TEXT = "When Mary and John went to the store, John gave a drink to"


@pytest.fixture
def page(browser, model_server_url):
    with watched_page(browser, width=1400, height=900) as (p, _):
        yield p


def open_model(page, url, model):
    page.goto(f"{url}/?mode=model&model={model}&text={TEXT}")
    page.wait_for_function(
        "() => Number(document.body.dataset.modelRenders || 0) >= 1", timeout=120_000
    )


def keys_of(page, box="#why-box"):
    return page.eval_on_selector_all(
        f"{box} .why-split .why-key[data-key]",
        "els => els.map(e => [e.dataset.token, Number(e.dataset.weight), Number(e.dataset.part)])",
    )


def test_click_a_head_to_see_its_split_by_key(page, model_server_url, smollm2):
    open_model(page, model_server_url, "smollm2-135m")
    page.fill("#why-baseline", "␣John")
    page.click("#why-run")
    page.wait_for_function("() => Number(document.body.dataset.whyRuns || 0) >= 1", timeout=300_000)
    assert "likeliest next token: ␣Mary" in page.inner_text("#why-status")
    assert "logit(␣Mary) − logit(␣John)" in page.inner_text("#why-box .why-question")
    cells = page.locator("#why-box button.why-cell")
    assert cells.count() == 30 * 9
    values = cells.evaluate_all("els => els.map(e => Number(e.dataset.value))")
    # the shares line adds up to the model's own logit difference
    line = page.inner_text("#why-box .why-shares")
    *parts, total = (float(x.replace("−", "-")) for x in re.findall(r"−?\d+\.\d+", line)[:5])
    assert sum(parts) == pytest.approx(total, abs=3e-3)
    assert parts[1] == pytest.approx(sum(values), abs=1e-3)  # the heads' part is the grid's sum

    # the second top head (the first is open already): clicking it opens its split
    second = page.locator("#why-box .why-top-head").nth(1)
    layer, head = int(second.get_attribute("data-layer")), int(second.get_attribute("data-head"))
    page.click(f'#why-box button.why-cell[data-layer="{layer}"][data-head="{head}"]')
    page.wait_for_function(
        "(k) => document.querySelector('#why-box').dataset.head === k", arg=f"{layer}.{head}"
    )
    got = keys_of(page)
    want = models.layer_trace("smollm2-135m", TEXT, layer=layer, model=smollm2)
    L = len(want.tokens)
    assert [t for t, _, _ in got] == labels(want.tokens, L)  # "␣John@3", "␣to", ...
    assert "␣John@3" in [t for t, _, _ in got]
    # the split's weights are the head's row at the last token, as qkv's own model computes it
    np.testing.assert_allclose([w for _, w, _ in got], want["weights"][head, L - 1], atol=2e-5)
    share = float(
        page.get_attribute(
            f'#why-box button.why-cell[data-layer="{layer}"][data-head="{head}"]', "data-value"
        )
    )
    assert sum(p for _, _, p in got) == pytest.approx(share, rel=1e-4, abs=1e-5)
    assert f"layer {layer}, head {head}" in page.inner_text("#why-box .why-split h3")
    # the page selects the head too: its whole pattern shows in the panels below
    page.wait_for_function(
        "(k) => document.querySelector('#grid button.thumb.selected')?.getAttribute('aria-label')"
        " === k",
        arg=f"layer {layer}, head {head}",
        timeout=120_000,
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#panel-why").screenshot(path=str(ARTIFACTS / "why-panel.png"))


def test_an_encoder_cannot_be_explained_and_says_why(page, model_server_url):
    open_model(page, model_server_url, "minilm-l6")
    page.wait_for_function("() => document.querySelector('#why-status').textContent")
    assert page.locator("#why-run").is_disabled()
    assert "encoder" in page.inner_text("#why-status")


def hand_attribution() -> dict:
    """An Attribution.to_dict() small enough to check by eye: 2 layers × 2 heads."""
    return {
        "tokens": ["When", " Mary", " met", " Mary"],
        "position": 3,
        "target": {"token": " John", "id": 7},
        "baseline": None,
        "logit_diff": 1.5,
        "embed": 0.5,
        "heads": [[0.25, -0.5], [1.0, 0.0]],
        "mlp": [0.125, 0.125],
        "rest": 0.0,
        "by_key": [
            {
                "layer": 1,
                "head": 0,
                "value": 1.0,
                "weights": [0.5, 0.25, 0.125, 0.125],
                "parts": [0.75, 0.5, -0.25, 0.0],
            }
        ],
    }


def test_an_exported_panel_opens_offline_and_clicks_through(browser, tmp_path):
    from qkv.notebook.export import to_html

    path = tmp_path / "why.html"
    to_html(hand_attribution(), path)
    packed = re.search(r'id="qkv-data"[^>]*>([^<]+)<', path.read_text())[1]
    data = json.loads(gzip.decompress(base64.b64decode(packed)))
    assert data["info"]["kind"] == "why" and data["info"]["why"]["splits"]["1.0"]["sum"] == 1.0
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    blocked, errors = [], []
    context.route(
        "**/*",
        lambda r: (
            r.continue_()
            if r.request.url.startswith(("file:", "data:", "blob:"))
            else (blocked.append(r.request.url), r.abort())
        ),
    )
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(path.as_uri())
        page.locator("#qkv .why-split .why-key[data-key]").first.wait_for()
        assert page.locator("#qkv button.why-cell").count() == 4
        assert keys_of(page, "#qkv") == [
            ["When", 0.5, 0.75],
            ["␣Mary@1", 0.25, 0.5],
            ["␣met", 0.125, -0.25],
            ["␣Mary@3", 0.125, 0.0],
        ]
        assert "logit(␣John) = 1.500" in page.inner_text("#qkv .why-question")
        page.click('#qkv button.why-cell[data-layer="0"][data-head="1"]')
        assert "not split by key" in page.inner_text("#qkv .why-split")
        assert "share −0.500" in page.inner_text("#qkv .why-split h3")
        assert not errors and not blocked
    finally:
        context.close()
