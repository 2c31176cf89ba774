"""The page's optional steps in Chromium: a soft-cap, a sink and an ALiBi slope typed into the
scene settings show the capped and biased stages, a sink bar and the sum with the sink, with the
numbers of float64 math written out here; clearing them takes the steps away again."""

from __future__ import annotations

import numpy as np
import pytest
from web_watch import renders, wait_render, watched_page

from qkv import presets

CAT = presets.load("cat-sat")


def by_hand(i: int, *, cap: float, sink: float, slope: float):
    """Row i of cat-sat with the three steps, float64 einsum, no causal mask."""
    q = np.einsum("ld,de->le", CAT.x, CAT.W_Q)
    k = np.einsum("sd,de->se", CAT.x, CAT.W_K)
    s = np.einsum("e,se->s", q[i], k) / np.sqrt(q.shape[1])
    capped = cap * np.tanh(s / cap)
    biased = capped - slope * np.abs(i - np.arange(len(s)))
    top = max(biased.max(), sink)
    e, e_sink = np.exp(biased - top), np.exp(sink - top)
    return capped, biased, e / (e.sum() + e_sink), e_sink / (e.sum() + e_sink)


def set_step(page, name: str, text: str):
    before = renders(page)
    box = page.locator(f"#{name}")
    box.fill(text)
    box.press("Tab")
    wait_render(page, before)


@pytest.fixture
def page(browser, server_url):
    with watched_page(browser) as (page, _):
        page.goto(server_url + "/")
        page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
        yield page


def test_softcap_sink_and_alibi_show_their_steps_with_float64_numbers(page):
    assert page.locator("#stages button[data-stage=capped]").is_hidden()
    page.locator("#extra-steps summary").click()
    set_step(page, "softcap", "1")
    set_step(page, "sink", "0")
    set_step(page, "alibi", "0.5")
    capped, biased, w, sink = by_hand(2, cap=1.0, sink=0.0, slope=0.5)
    keys = np.array(
        page.eval_on_selector_all(
            "#bars .bar:not(.sink)", "els => els.map(e => Number(e.dataset.weight))"
        )
    )
    np.testing.assert_allclose(keys, w, rtol=1e-12)
    shown_sink = float(page.locator("#bars .bar.sink").get_attribute("data-weight"))
    assert shown_sink == pytest.approx(sink, rel=1e-12)
    assert page.locator("#with-sink").inner_text() == f"{sink:.3f} → Σ = 1.000"
    for stage, row in (("capped", capped), ("biased", biased)):
        page.locator(f"#stages button[data-stage={stage}]").click()
        cells = page.eval_on_selector_all(
            "#heatmap tbody tr:nth-child(3) td[data-value]",
            "els => els.map(e => Number(e.dataset.value))",
        )
        np.testing.assert_allclose(cells, row, rtol=1e-12)
    assert page.locator("#diagram .node[data-step=capped]").count() == 1
    assert "softmax₊sink" in page.locator("#formula").inner_text()
    # the URL follows the state within URL_DELAY (150 ms) of the last change
    page.wait_for_function(
        "() => ['softcap', 'sink', 'alibi'].every(k => location.search.includes(k + '='))",
        timeout=10_000,
    )


def test_clearing_the_steps_takes_them_away(page, server_url):
    page.goto(server_url + "/?preset=cat-sat&softcap=2&sink=-1")
    page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
    assert page.locator("#extra-steps").get_attribute("open") is not None
    assert page.locator("#softcap").input_value() == "2"
    page.locator("#stages button[data-stage=capped]").click()
    set_step(page, "softcap", "")
    set_step(page, "sink", "")
    assert page.locator("#stages button[data-stage=capped]").is_hidden()
    assert (
        page.locator("#stages button[data-stage=weights]").get_attribute("aria-checked") == "true"
    )
    assert page.locator("#bars .bar.sink").count() == 0
    assert page.locator("#with-sink").count() == 0


def test_a_value_the_server_refuses_is_named(browser, server_url):
    with watched_page(browser) as (page, watch):
        page.goto(server_url + "/")
        page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
        page.locator("#extra-steps summary").click()
        page.locator("#softcap").fill("0")
        page.locator("#softcap").press("Tab")
        page.wait_for_selector("#error:not([hidden])")
        assert "softcap" in page.locator("#error").inner_text()
        watch.errors.clear()  # the 422 is logged by the browser as a failed request
