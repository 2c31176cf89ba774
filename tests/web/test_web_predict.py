"""Predict-then-reveal and the practice panel in Debian's Chromium (Playwright): the learner's
guess, the reveal, the feedback against an independent float64 reference, no console errors
and no request leaving 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from web_reference import multi_head, single_head
from web_watch import renders, wait_render, watched_page

from qkv import presets

CAT = presets.load("cat-sat")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"  # gitignored
# the right statement of each multiple-choice concept, in words written for this test
RIGHT = {
    "concepts/key": "matched against",
    "concepts/value": "mixed into the output",
    "concepts/three": "learned separately",
    "concepts/scale": "saturate",
    "concepts/masking": "a decoder",
    "concepts/symmetric": "symmetric",
}
VEILED = ["panel-pipeline", "panel-weights", "panel-z", "panel-formula", "panel-walkthrough"]


@pytest.fixture
def page(browser, server_url):
    with watched_page(browser, height=1000) as (p, watch):
        p.goto(server_url + "/")
        p.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
        p.urls = watch.urls
        yield p


def click_and_render(page, locator):
    before = renders(page)
    locator.click()
    wait_render(page, before)


def veiled(page) -> list[str]:
    return [p for p in VEILED if "veiled" in (page.get_attribute(f"#{p}", "class") or "")]


def set_weight(page, value: float):
    page.fill("#predict-weight", str(value))  # a range input: fill sets it and fires input


def test_guess_reveal_feedback_wrong_then_right(page):
    w, _ = single_head(CAT.x, CAT.W_Q, CAT.W_K, CAT.W_V)  # (L, S), independent float64
    i = CAT.select
    best = int(np.argmax(w[i]))
    wrong = int(np.argmin(w[i]))
    assert page.locator("#panel-predict").is_hidden() and veiled(page) == []

    page.check("#predict")
    assert page.locator("#panel-predict").is_visible()
    assert page.get_attribute("#panel-predict", "data-state") == "guess"
    assert veiled(page) == VEILED
    assert page.locator("#bars").is_hidden() and page.locator("#heatmap").is_hidden()
    assert page.locator("#predict-query").inner_text() == CAT.tokens[i]
    assert page.locator("#predict-keys button").all_inner_texts() == list(CAT.tokens)
    assert page.locator("#predict-reveal").is_disabled()  # no key picked yet
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-predict-guess.png"))

    page.locator("#predict-keys button").nth(wrong).click()
    set_weight(page, 0.4)
    assert page.locator("#predict-weight-value").inner_text() == "0.40"
    page.click("#predict-reveal")
    box = page.locator("#predict-feedback")
    assert box.is_visible()
    assert box.get_attribute("data-correct") == "false"
    assert int(box.get_attribute("data-winner")) == best
    assert float(box.get_attribute("data-gap")) == pytest.approx(abs(0.4 - w[i, wrong]), abs=1e-12)
    verdict = page.locator("#predict-verdict").inner_text()
    assert verdict.startswith("✗") and f'"{CAT.tokens[best]}" ({w[i, best]:.3f})' in verdict
    assert f"off by {abs(0.4 - w[i, wrong]):.3f}" in page.locator("#predict-gap").inner_text()
    assert veiled(page) == [] and page.locator("#bars").is_visible()
    assert page.get_attribute("#panel-predict", "data-state") == "revealed"
    # the estimate is drawn on the guessed key's bar
    assert page.locator(f"#bars .bar[data-key='{wrong}'] .guess-mark").count() == 1
    assert page.locator("#predict-keys button.winner").all_inner_texts() == [CAT.tokens[best] + ""]
    page.screenshot(path=str(ARTIFACTS / "web-predict-revealed.png"))

    # another query: a fresh question, the panels hidden again
    j = 1
    click_and_render(page, page.locator("#tokens button").nth(j))
    assert page.get_attribute("#panel-predict", "data-state") == "guess"
    assert veiled(page) == VEILED and page.locator(".guess-mark").count() == 0
    best_j = int(np.argmax(w[j]))
    page.locator("#predict-keys button").nth(best_j).click()
    set_weight(page, round(float(w[j, best_j]), 2))
    page.click("#predict-reveal")
    assert page.locator("#predict-feedback").get_attribute("data-correct") == "true"
    assert page.locator("#predict-verdict").inner_text().startswith("✓ right")
    assert "1 of 2 winners right" in page.locator("#predict-tally").inner_text()


def test_causal_masked_keys_cannot_be_picked_and_toggle_off_reveals(page):
    click_and_render(page, page.locator("#causal"))
    page.check("#predict")
    i = CAT.select  # "sat" at position 2 sees keys 0..2 only
    keys = page.locator("#predict-keys button")
    assert [keys.nth(j).is_disabled() for j in range(6)] == [j > i for j in range(6)]
    page.uncheck("#predict")
    assert veiled(page) == [] and page.locator("#panel-predict").is_hidden()
    w, _ = single_head(CAT.x, CAT.W_Q, CAT.W_K, CAT.W_V, causal=True)
    got = page.eval_on_selector_all("#bars .bar", "els => els.map(e => Number(e.dataset.weight))")
    np.testing.assert_allclose(got, w[i], rtol=1e-12)


def test_two_heads_predicts_the_selected_heads_weights(page, server_url):
    scene = presets.load("two-heads")
    page.goto(server_url + "/?preset=two-heads&head=1")
    page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
    page.check("#predict")
    assert page.locator("#predict-head").inner_text() == " (head 1)"
    w, _, _ = multi_head(scene.x, scene.W_Q, scene.W_K, scene.W_V, scene.W_O, scene.b_O)
    row = w[1, scene.select]  # head 1's weights for the selected query
    best = int(np.argmax(row))
    page.locator("#predict-keys button").nth(best).click()
    set_weight(page, 0.9)
    page.click("#predict-reveal")
    box = page.locator("#predict-feedback")
    assert box.get_attribute("data-correct") == "true"
    assert float(box.get_attribute("data-truth")) == pytest.approx(row[best], rel=1e-12)
    assert float(box.get_attribute("data-gap")) == pytest.approx(abs(0.9 - row[best]), abs=1e-12)


def test_changing_tau_after_a_reveal_asks_again(page):
    page.check("#predict")
    page.locator("#predict-keys button").nth(0).click()
    page.click("#predict-reveal")
    assert page.get_attribute("#panel-predict", "data-state") == "revealed"
    before = renders(page)
    page.fill("#tau", "200")
    page.wait_for_function("(n) => Number(document.body.dataset.renders) > n", arg=before)
    page.wait_for_function(
        "() => document.querySelector('#panel-predict').dataset.state === 'guess'"
    )
    assert veiled(page) == VEILED


def test_practice_panel_wrong_bad_and_choice_answers(page):
    page.check("#practice")
    panel = page.locator("#panel-practice")
    page.wait_for_selector("#panel-practice[data-state=asking]")
    page.select_option("#practice-topic", "sizes")
    page.wait_for_function(
        "() => (document.querySelector('#panel-practice').dataset.kind || '').startsWith('sizes/')"
    )
    page.fill("#practice-answer", "seventy")
    page.click("#practice-check")
    page.wait_for_selector("#practice-error:not([hidden])")
    assert "expected a number" in page.locator("#practice-error").inner_text()
    assert panel.get_attribute("data-state") == "asking"
    page.fill("#practice-answer", "0.5")  # no size exercise has the answer 0.5
    page.click("#practice-check")
    page.wait_for_selector("#panel-practice[data-state=answered]")
    assert page.locator("#practice-result").get_attribute("data-correct") == "false"
    assert page.locator("#practice-verdict").inner_text().startswith("✗ not quite")
    assert "worked solution" in page.locator("#practice-result").inner_text()
    assert page.locator("#practice-score").inner_text() == "score 0 / 1"

    # a multiple-choice question answered by clicking; the server says which was right
    page.select_option("#practice-topic", "concepts")
    for _ in range(30):
        page.wait_for_selector("#panel-practice[data-state=asking]")
        if page.locator("#practice-choices button.choice").count():
            break
        page.click("#practice-new")
        page.wait_for_timeout(50)
    page.click("#practice-hint")
    assert page.locator("#practice-hint-text").inner_text().startswith("hint: ")
    kind = panel.get_attribute("data-kind")
    page.locator("#practice-choices button.choice", has_text=RIGHT[kind]).click()
    page.wait_for_selector("#panel-practice[data-state=answered]")
    assert page.locator("#practice-verdict").inner_text().startswith("✓ right")
    assert page.locator("#practice-score").inner_text() == "score 1 / 2"
    assert any(u.endswith("/api/practice/check") for u in page.urls)
    page.screenshot(path=str(ARTIFACTS / "web-practice.png"))
