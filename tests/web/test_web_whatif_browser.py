"""The real-model mode's "what if" panel and the grid's taxonomy overlay in Chromium, on SmolLM2:
the bars show qkv.hf.compare's numbers and the badges qkv.hf.taxonomy's, each run directly here;
MiniLM (an encoder) gets a disabled control that says why."""

from __future__ import annotations

import numpy as np
import pytest
from web_watch import watched_page

pytest.importorskip("transformers", reason="the what-if needs the hf extra (pip install 'qkv[hf]')")
TEXT = "The capital of France is"


@pytest.fixture
def page(browser, model_server_url):
    with watched_page(browser, width=1400, height=900) as (p, _):
        yield p


def open_model(page, url, model, layer=3, head=4):
    page.goto(f"{url}/?mode=model&model={model}&text={TEXT}&layer={layer}&head={head}")
    page.wait_for_function(
        "() => Number(document.body.dataset.modelRenders || 0) >= 1", timeout=120_000
    )


def shown(page, when):
    return page.eval_on_selector_all(
        f'.whatif-column[data-when="{when}"] .bar',
        "els => els.map(e => [e.dataset.token, Number(e.dataset.p)])",
    )


def test_a_what_if_shows_compare_before_and_after(page, model_server_url, smollm2):
    import torch

    import qkv.hf
    from qkv.hf import bundled, loading

    open_model(page, model_server_url, "smollm2-135m")
    assert "layer 3, head 4" in page.inner_text("#whatif-head")
    page.select_option("#whatif-kind", "tau")
    page.fill("#whatif-tau", "0.2")
    page.click("#whatif-run")
    page.wait_for_function(
        "() => Number(document.body.dataset.whatifRuns || 0) >= 1", timeout=120_000
    )
    tok = loading.BundledTokenizer(smollm2)
    inputs = tok(TEXT)
    with torch.no_grad():
        want = qkv.hf.compare(
            bundled.from_own(smollm2), inputs, {"3.4": {"tau": 0.2}}, tokenizer=tok, top_k=5
        )
    for when, rows in (("before", want.before), ("after", want.after)):
        got = shown(page, when)
        assert [t for t, _ in got] == [t for t, _ in rows]
        np.testing.assert_allclose([p for _, p in got], [p for _, p in rows], rtol=1e-6)
    summary = page.inner_text("#whatif-summary")
    assert summary.startswith("layer 3 head 4: τ = 0.2: the likeliest next token")
    assert f"KL(before ‖ after) = {want.kl:.4f} nats" in summary


def test_an_encoder_has_no_what_if_and_says_why(page, model_server_url):
    open_model(page, model_server_url, "minilm-l6", layer=1, head=2)
    page.wait_for_function("() => document.querySelector('#whatif-why').textContent")
    assert page.locator("#whatif-run").is_disabled()
    assert "encoder" in page.inner_text("#whatif-why")


def test_the_overlay_marks_each_head_with_its_taxonomy_score(page, model_server_url, smollm2):
    from qkv.hf import taxonomy

    open_model(page, model_server_url, "smollm2-135m")
    page.select_option("#overlay-kind", "induction")
    page.wait_for_selector("#grid button.thumb .badge", timeout=120_000)
    want = taxonomy.measure(smollm2)
    got = page.eval_on_selector_all(
        "#grid button.thumb",
        "els => els.map(e => [Number(e.dataset.layer), "
        "Number(e.dataset.head), Number(e.dataset.score)])",
    )
    assert len(got) == 30 * 9
    for layer, head, score in got:
        assert score == pytest.approx(want.induction[layer, head], rel=1e-6, abs=1e-9)
    ((layer, head, top),) = want.top("induction", 1)
    badge = page.locator(f'#grid button.thumb[data-layer="{layer}"][data-head="{head}"] .badge')
    assert badge.inner_text() == f"{top:.2f}".replace("0.", ".")
    assert "token after that earlier copy" in page.inner_text("#overlay-legend")
    page.select_option("#overlay-kind", "")
    assert page.locator("#grid button.thumb .badge").count() == 0


def test_the_what_if_fits_a_phone(browser, model_server_url):
    with watched_page(browser, width=390, height=844) as (page, _):
        open_model(page, model_server_url, "smollm2-135m")
        page.select_option("#whatif-kind", "knockout")
        page.select_option("#whatif-key", "0")
        page.click("#whatif-run")
        page.wait_for_function(
            "() => Number(document.body.dataset.whatifRuns || 0) >= 1", timeout=120_000
        )
        assert "key 0 knocked out" in page.inner_text("#whatif-summary")
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") == 0
