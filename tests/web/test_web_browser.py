"""The simulator page in Debian's Chromium (Playwright): what a person clicks, and what the page
then shows, read back from the DOM and compared with an independent float64 reference."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
from web_reference import multi_head, single_head
from web_watch import edit_x, renders, wait_render, watched_page

from qkv import presets

CAT = presets.load("cat-sat")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"  # gitignored; screenshots land here


@pytest.fixture
def watched(browser, server_url):
    with watched_page(browser) as (page, watch):
        yield page, watch


def open_page(page, url):
    page.goto(url)
    page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")


def bar_weights(page) -> np.ndarray:
    return np.array(
        page.eval_on_selector_all("#bars .bar", "els => els.map(e => Number(e.dataset.weight))")
    )


def z_row(page) -> np.ndarray:
    return np.array(
        page.eval_on_selector_all(
            "#contrib tr.total td[id^=z-]", "els => els.map(e => Number(e.dataset.value))"
        )
    )


def wait_url(page, *parts: str) -> str:
    """The page's URL once it holds every part (it follows the state within a few frames)."""
    page.wait_for_function(
        "(parts) => parts.every((p) => location.search.includes(p))", arg=list(parts)
    )
    return page.url


def selected_token(page) -> str:
    return page.locator("#tokens button[aria-pressed=true]").inner_text()


def test_default_view(watched, server_url):
    page, watch = watched
    open_page(page, server_url + "/")
    assert page.locator("#tokens button").all_inner_texts() == list(CAT.tokens)
    assert selected_token(page) == "sat"
    assert page.locator("table[data-step=q] tr.selected th").inner_text() == "sat"
    w, z = single_head(CAT.x, CAT.W_Q, CAT.W_K, CAT.W_V)
    np.testing.assert_allclose(bar_weights(page), w[2], rtol=1e-12)
    np.testing.assert_allclose(z_row(page), z[2], rtol=1e-12)
    assert page.locator("#weights-sum").inner_text() == "1.000"
    assert page.locator("#tau-value").inner_text() == "1.00"
    wait_url(page, "preset=cat-sat", "token=2", "tau=1")
    # the walkthrough is the engine's explain text
    assert "scores = q·kᵀ" in page.locator("#walkthrough").inner_text()
    # MathML renders natively: the formula has a real box and the selected z in it
    assert page.locator("#formula math mtr").count() == 4
    assert page.locator("#formula math").bounding_box()["height"] > 60  # laid out as math
    assert f"{z[2][0]:.3f}" in page.locator("#formula").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-default.png"), full_page=True)
    assert watch.traces() >= 1 and all(urlsplit(u).hostname == "127.0.0.1" for u in watch.urls)


def test_click_a_token_selects_its_row(watched, server_url):
    page, _ = watched
    open_page(page, server_url + "/")
    before = renders(page)
    page.locator("#tokens button", has_text="cat").click()
    wait_render(page, before)
    assert selected_token(page) == "cat"
    for step in ("q", "k", "v"):
        assert page.locator(f"table[data-step={step}] tr.selected th").inner_text() == "cat"
    assert page.locator("#heatmap tr.selected th").inner_text() == "cat"
    w, _ = single_head(CAT.x, CAT.W_Q, CAT.W_K, CAT.W_V)
    np.testing.assert_allclose(bar_weights(page), w[1], rtol=1e-12)
    wait_url(page, "token=1")


def test_tokens_are_keyboard_selectable(watched, server_url):
    page, _ = watched
    open_page(page, server_url + "/")
    before = renders(page)
    page.locator("#tokens button[aria-pressed=true]").press("ArrowRight")
    wait_render(page, before)
    assert selected_token(page) == "on"
    before = renders(page)
    page.locator("#tokens button").nth(5).focus()
    page.keyboard.press("Enter")
    wait_render(page, before)
    assert selected_token(page) == "mat"


def test_tau_slider_changes_the_weights_which_still_sum_to_1(watched, server_url):
    page, _ = watched
    open_page(page, server_url + "/")
    w1 = bar_weights(page)
    peak = {}
    for position, shown in [("200", "0.144"), ("0", "0.050"), ("1000", "10.00"), ("700", "2.04")]:
        before = renders(page)
        page.locator("#tau").fill(position)
        wait_render(page, before)
        assert page.locator("#tau-value").inner_text() == shown
        tau = float(page.evaluate("() => document.body.dataset.tau"))
        assert tau == pytest.approx(float(shown), rel=1e-9)
        w = bar_weights(page)
        assert w.sum() == pytest.approx(1.0, abs=1e-12)
        assert not np.allclose(w, w1, atol=1e-3)
        ref, _ = single_head(CAT.x, CAT.W_Q, CAT.W_K, CAT.W_V, tau=tau)
        np.testing.assert_allclose(w, ref[2], rtol=1e-12)
        assert page.locator("#weights-sum").inner_text() == "1.000"
        peak[tau] = w.max()
    assert peak[0.05] > peak[0.144] > w1.max() > peak[2.04] > peak[10.0]  # low τ sharpens
    wait_url(page, "tau=2.04")


def test_causal_gives_future_keys_weight_zero(watched, server_url):
    page, _ = watched
    open_page(page, server_url + "/")
    before = renders(page)
    page.locator("#causal").check()
    wait_render(page, before)
    w = bar_weights(page)
    assert (w[3:] == 0).all() and (w[:3] > 0).all()
    assert page.locator("#bars .bar.masked").count() == 3
    ref, _ = single_head(CAT.x, CAT.W_Q, CAT.W_K, CAT.W_V, causal=True)
    np.testing.assert_allclose(w, ref[2], rtol=1e-12, atol=0)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)
    page.locator("#stages button", has_text="masked").click()
    row = page.locator("#heatmap tr.selected td")
    assert row.all_inner_texts()[3:] == ["−∞"] * 3
    assert "masked" in (row.nth(4).get_attribute("class") or "")
    row.nth(4).hover()
    assert "masked[sat → the] = −∞ · masked" in page.locator("#hover").inner_text()
    wait_url(page, "causal=bottom-right")


def test_editing_a_value_changes_the_output(watched, server_url):
    page, watch = watched
    open_page(page, server_url + "/")
    z_before = z_row(page)
    cell = edit_x(page, 2, 0, "2.5")
    x = CAT.x.copy()
    x[2, 0] = 2.5
    _, z = single_head(x, CAT.W_Q, CAT.W_K, CAT.W_V)
    z_after = z_row(page)
    assert not np.allclose(z_after, z_before)
    np.testing.assert_allclose(z_after, z[2], rtol=1e-12)
    assert "edited" in cell.get_attribute("class")
    # a weight cell too: W_V[0][1][1] scales what 'cat' delivers
    before = renders(page)
    w_cell = page.locator('#w-editors input[aria-label="W_V[0][1][1]"]')
    w_cell.fill("-3")
    w_cell.press("Enter")
    wait_render(page, before)
    W_V = CAT.W_V.copy()
    W_V[1, 1] = -3.0
    _, z = single_head(x, CAT.W_Q, CAT.W_K, W_V)
    np.testing.assert_allclose(z_row(page), z[2], rtol=1e-12)
    # a non-number is marked, explained and never sent
    sent = watch.traces()
    bad = page.locator('#x-editor input[aria-label="x[0][0]"]')
    bad.fill("1,5")
    bad.press("Tab")
    assert "invalid" in bad.get_attribute("class")
    assert "is not a number" in page.locator("#error").inner_text()
    page.evaluate("() => fetch('/api/presets').then(r => r.json())")  # a round trip later ...
    assert watch.traces() == sent  # ... still no trace request for the bad value


def test_reloading_a_shared_url_restores_the_state(watched, server_url, browser):
    page, _ = watched
    open_page(page, server_url + "/")
    before = renders(page)
    page.locator("#preset").select_option("bank")
    wait_render(page, before)
    for act in (
        lambda: page.locator("#tokens button").nth(6).click(),
        lambda: page.locator("#tau").fill("300"),
        lambda: page.locator("#causal").check(),
    ):
        before = renders(page)
        act()
        wait_render(page, before)
    page.locator("#stages button", has_text="scaled").click()
    url = wait_url(
        page, "preset=bank", "token=6", "tau=0.245&", "causal=bottom-right", "stage=scaled"
    )
    weights = bar_weights(page)

    other = browser.new_page()
    try:
        open_page(other, url)
        assert other.locator("#preset").input_value() == "bank"
        assert selected_token(other) == "deposit"
        assert other.locator("#tau-value").inner_text() == page.locator("#tau-value").inner_text()
        assert other.locator("#causal").is_checked()
        assert other.locator("#stages button[aria-checked=true]").inner_text() == "scaled"
        np.testing.assert_array_equal(bar_weights(other), weights)
        assert other.url == url
    finally:
        other.close()


def test_multi_head_scene_shows_each_head_and_their_sum(watched, server_url):
    page, _ = watched
    open_page(page, server_url + "/?preset=two-heads&head=1")
    scene = presets.load("two-heads")
    w, z, out = multi_head(scene.x, scene.W_Q, scene.W_K, scene.W_V, scene.W_O, scene.b_O)
    assert page.locator("#panel-heads").is_visible()
    assert page.locator("#head").input_value() == "1"
    assert page.locator("#scaled").is_disabled()
    np.testing.assert_allclose(bar_weights(page), w[1, 2], rtol=1e-12)
    text = page.locator("#out-row").inner_text()
    assert text == "[" + ", ".join(f"{v:.2f}".replace("-", "−") for v in out[2]) + "]"
    before = renders(page)
    page.locator("#head").select_option("0")
    wait_render(page, before)
    np.testing.assert_allclose(bar_weights(page), w[0, 2], rtol=1e-12)
    assert page.locator("#heads tr.selected th").inner_text() == "head 0"


def test_every_preset_renders_cleanly(watched, server_url):
    page, watch = watched
    open_page(page, server_url + "/")
    for name in presets.names()[1:]:
        before = renders(page)
        page.locator("#preset").select_option(name)
        wait_render(page, before)
        scene = presets.load(name)
        assert page.locator("#tokens button").all_inner_texts() == list(scene.tokens)
        assert bar_weights(page).sum() == pytest.approx(1.0, abs=1e-12)
    before = renders(page)
    page.locator("#reset").click()
    wait_render(page, before)
    assert selected_token(page) == presets.load("two-heads").tokens[2]
    assert page.locator("#error").is_hidden()
    assert watch.traces() >= len(presets.names())


def test_a_broken_shared_url_falls_back_to_defaults(watched, server_url):
    page, _ = watched
    open_page(page, server_url + "/?preset=nope&token=99&tau=abc&head=5&stage=x&causal=sideways")
    assert page.locator("#preset").input_value() == "cat-sat"
    assert selected_token(page) == "sat"
    assert page.locator("#tau-value").inner_text() == "1.00"
    assert not page.locator("#causal").is_checked()
    assert page.locator("#stages button[aria-checked=true]").inner_text() == "weights"
    assert page.locator("#error").is_hidden()
    wait_url(page, "preset=cat-sat&token=2&tau=1")
