"""The simulator page at phone, tablet and desktop sizes in Debian's Chromium (Playwright): no
sideways scrolling, a short sticky header, taps select, every visible button and label readable
(WCAG AA contrast computed from the computed styles), readouts on tap and focus that follow each
answer, the selected token's path with the engine's numbers. The watched page fails a test on any
console error or request off 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from web_reference import single_head
from web_watch import edit_x, renders, wait_render, watched_page

from qkv import presets

CAT = presets.load("cat-sat")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"  # gitignored; screenshots land here
SIZES = {"phone": (390, 844), "tablet": (768, 1024), "desktop": (1400, 900)}

# WCAG 2 contrast of every visible button and label: its text colour against the first opaque
# background found walking up from it (alpha blended over white), both from getComputedStyle.
CONTRASTS = """() => {
  const rgba = (s) => { const m = s.match(/[\\d.]+/g).map(Number); return [...m, 1].slice(0, 4); };
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const over = (top, under) => top.slice(0, 3).map((c, k) => c * top[3] + under[k] * (1 - top[3]));
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    return layers.reverse().reduce((under, c) => over(c, under), [255, 255, 255]);
  };
  const visible = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden";
  return [...document.querySelectorAll("button, label, summary")].filter(visible).map((e) => {
    const style = getComputedStyle(e);
    const bg = background(e);
    const fg = over(rgba(style.color), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    return { what: `${e.tagName.toLowerCase()}#${e.id} "${e.textContent.trim().slice(0, 30)}"`,
             ratio: (hi + 0.05) / (lo + 0.05), opacity: Number(style.opacity) };
  });
}"""


@pytest.fixture(params=list(SIZES))
def sized(request, browser, server_url):
    width, height = SIZES[request.param]
    with watched_page(browser, width=width, height=height) as (page, watch):
        page.goto(server_url + "/")
        page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
        yield request.param, page


def overflow(page) -> int:
    """How many pixels the page is wider than the window (0: no sideways scrolling)."""
    return page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")


def test_no_sideways_scrolling_and_a_short_sticky_header(sized):
    name, page = sized
    assert overflow(page) == 0
    header = page.evaluate("""() => { const h = document.querySelector('header');
      return {position: getComputedStyle(h).position, height: h.offsetHeight,
              window: window.innerHeight}; }""")
    if header["position"] == "sticky":
        assert header["height"] <= 0.15 * header["window"], header
    else:
        assert header["position"] == "static"  # too tall to stay: it scrolls away
    if name == "desktop":
        assert header["position"] == "sticky"
    # every panel, the optional ones too, and every preset: still no sideways scrolling
    page.check("#predict")
    page.check("#practice")
    page.wait_for_function("() => document.querySelector('#practice-prompt').textContent")
    for preset in presets.names():
        before = renders(page)
        page.locator("#preset").select_option(preset)
        wait_render(page, before)
        assert overflow(page) == 0, preset
    if name != "desktop":  # panels stack: one column
        lefts = page.eval_on_selector_all(
            "main > .panel:not([hidden])", "els => els.map(e => Math.round(e.offsetLeft))"
        )
        assert len(set(lefts)) == 1, lefts


def test_every_visible_button_and_label_meets_aa_contrast(sized):
    name, page = sized
    page.check("#predict")
    page.check("#practice")
    page.wait_for_function("() => document.querySelector('#practice-prompt').textContent")
    page.click("#how-to summary")  # "How to use", opened
    seen = {}
    for state in ("guess", "picked", "revealed"):
        if state == "picked":
            page.locator("#predict-keys button").nth(1).click()  # reveal is enabled now
        if state == "revealed":
            page.click("#predict-reveal")
        for c in page.evaluate(CONTRASTS):
            seen[f"{state}: {c['what']}"] = c
    assert any("predict-reveal" in k for k in seen) and any("practice-check" in k for k in seen)
    low = {k: round(c["ratio"], 2) for k, c in seen.items() if c["ratio"] < 4.5 or c["opacity"] < 1}
    assert low == {}, f"{name}: below 4.5:1 (or see-through)"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"web-{name}.png"), full_page=True)


@pytest.mark.parametrize("size", ["phone", "tablet"])
def test_a_tap_selects_a_token_and_updates_the_url(browser, server_url, size):
    width, height = SIZES[size]
    with watched_page(browser, width=width, height=height, has_touch=True, is_mobile=True) as (
        page,
        _,
    ):
        page.goto(server_url + "/")
        page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
        before = renders(page)
        page.locator("#tokens button", has_text="cat").tap()
        wait_render(page, before)
        assert page.locator("#tokens button[aria-pressed=true]").inner_text() == "cat"
        page.wait_for_function("() => location.search.includes('token=1')")
        # a tap on a heatmap cell reads it out, as pointing at it does
        cell = page.locator("#heatmap tr.selected td").nth(3)
        cell.tap()
        assert page.locator("#hover").inner_text() == cell.get_attribute("data-label")
        assert page.locator("#hover").inner_text().startswith("weights[cat → on] = ")
        assert overflow(page) == 0


def test_readout_on_focus_follows_every_answer(browser, server_url):
    with watched_page(browser) as (page, _):
        page.goto(server_url + "/")
        page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
        page.locator("#heatmap td[tabindex='0']").focus()  # the table's one tab stop
        page.keyboard.press("ArrowRight")
        label = page.locator("#hover").inner_text()
        w, _ = single_head(CAT.x, CAT.W_Q, CAT.W_K, CAT.W_V)
        assert label == f"weights[sat → cat] = {w[2, 1]:.4f}"
        before = renders(page)
        page.locator("#tau").fill("300")  # a new answer: the readout shows the new value
        wait_render(page, before)
        tau = float(page.evaluate("() => document.body.dataset.tau"))
        w, _ = single_head(CAT.x, CAT.W_Q, CAT.W_K, CAT.W_V, tau=tau)
        assert page.locator("#hover").inner_text() == f"weights[sat → cat] = {w[2, 1]:.4f}"
        # an edit of X too
        edit_x(page, 1, 0, "2")
        x = CAT.x.copy()
        x[1, 0] = 2.0
        w, _ = single_head(x, CAT.W_Q, CAT.W_K, CAT.W_V, tau=tau)
        assert page.locator("#hover").inner_text() == f"weights[sat → cat] = {w[2, 1]:.4f}"


def test_the_selected_tokens_path_holds_the_engines_numbers(browser, server_url):
    with watched_page(browser) as (page, _):
        page.goto(server_url + "/?preset=cat-sat&tau=0.5")
        page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
        w, z = single_head(CAT.x, CAT.W_Q, CAT.W_K, CAT.W_V, tau=0.5)
        fmt = lambda a, d: "[" + ", ".join(f"{v:.{d}f}".replace("-", "−") for v in a) + "]"  # noqa: E731
        value = lambda step: page.locator(f"#diagram .node-value[data-step={step}]").inner_text()  # noqa: E731
        assert value("weights") == fmt(w[2], 3)
        assert value("z") == fmt(z[2], 3)
        assert value("x") == fmt(CAT.x[2], 2)
        steps = page.eval_on_selector_all("#diagram .node", "els => els.map(e => e.dataset.step)")
        assert steps == ["x", "qkv", "scores", "scaled", "tempered", "masked", "weights", "z"]
        assert "τ = 0.500" in page.locator("#diagram .node[data-step=tempered]").inner_text()
        roles = page.locator("#diagram .roles li").all_inner_texts()
        assert [r.split(" · ")[0] for r in roles] == ["query q", "key k", "value v"]
        assert all("‘sat’" in r for r in roles)
        best = CAT.tokens[int(np.argmax(w[2]))]
        assert f"most weight to ‘{best}’ ({w[2].max():.3f})" in roles[1]
        # a box leads to its panel: ÷ τ shows the tempered stage
        page.locator("#diagram .node[data-step=tempered] button").click()
        page.wait_for_function(
            "() => document.querySelector('#stages [aria-checked=true]').dataset.stage === 'tempered'"
        )
        # z beside the values it mixes, on the same numbers
        mixed = page.eval_on_selector_all(
            "#mix-z .mix-cell", "els => els.map(e => Number(e.dataset.value))"
        )
        np.testing.assert_allclose(mixed, z[2], rtol=1e-12)
        assert page.locator("#mix .mix-row:not(.total)").count() == len(CAT.tokens)


def test_legend_and_a_readable_step_from_005_to_015(browser, server_url):
    with watched_page(browser) as (page, _):
        page.goto(server_url + "/")
        page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
        ticks = page.locator("#legend .tick").all_inner_texts()
        assert ticks == ["0.00", "0.05", "0.15", "0.30", "0.60", "1.00"]
        # the shades of weights 0.05 and 0.15 as the heatmap paints them (shade ∝ √weight)
        ratio = page.evaluate("""async () => {
          const { contrast, rampColor } = await import('/static/dom.js');
          return contrast(rampColor(Math.sqrt(0.05)), rampColor(Math.sqrt(0.15)));
        }""")
        assert ratio >= 1.5, ratio
        page.locator("#stages button", has_text="scores").click()
        assert page.locator("#legend .tick").count() == 3  # smallest, middle, largest score


def test_a_disabled_control_says_why(browser, server_url):
    with watched_page(browser) as (page, _):
        page.goto(server_url + "/?preset=two-heads")
        page.wait_for_function("() => Number(document.body.dataset.renders) >= 1")
        page.check("#predict")
        for sel in ("#align", "#scaled", "#predict-reveal"):
            assert page.locator(sel).is_disabled(), sel
            assert page.locator(sel).get_attribute("title"), sel
        assert "causal" in page.locator("#align").get_attribute("title")
        before = renders(page)
        page.check("#causal")
        wait_render(page, before)
        assert page.locator("#align").is_enabled()
        assert page.locator("#align").get_attribute("title") is None
