"""The notebook view in real Chromium: an exported HTML file opened from disk with the network
blocked, clicked through (token, head, τ, layer); and the widget's ES module driven by a
stand-in for anywidget's model (get/set/on/off/save_changes), two views on one page."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

import qkv

pytest.importorskip("anywidget", reason="the notebook extra is not installed")


def offline_page(browser, path):
    """The file opened with every non-file request aborted; (page, blocked, errors)."""
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    blocked, errors = [], []

    def route(r):
        if r.request.url.startswith(("file:", "data:", "blob:")):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    return page, blocked, errors


def heat_row(page, host: str, r: int) -> list[float]:
    """Row r of the drawn heatmap, read from the cells' data-value (inside the shadow root)."""
    return (
        page.locator(f"{host} #heatmap tbody tr")
        .nth(r)
        .locator("td")
        .evaluate_all("tds => tds.map(td => Number(td.dataset.value))")
    )


def test_exported_file_works_offline_and_clicks_through(browser, tmp_path):
    sc = qkv.presets.load("two-heads")
    path = tmp_path / "heads.html"
    sc.to_html(path, temperatures=[1.0, 0.5])
    page, blocked, errors = offline_page(browser, path)
    try:
        page.locator("#qkv #tokens button.selected").wait_for()
        tokens = page.locator("#qkv #tokens button")
        assert tokens.count() == 6
        # a token: it becomes the query, its row of head 0 is the engine's
        tokens.nth(2).click()
        page.locator("#qkv #tokens button.selected", has_text="sat").wait_for()
        ref = sc.trace().weights  # (heads, L, S)
        np.testing.assert_allclose(heat_row(page, "#qkv", 2), ref[0, 2], rtol=1e-12)
        bars = page.locator("#qkv #bars .bar").evaluate_all(
            "bs => bs.map(b => Number(b.dataset.weight))"
        )
        np.testing.assert_allclose(bars, ref[0, 2], rtol=1e-12)
        # a head
        page.locator("#qkv #head").select_option("1")
        page.wait_for_function(
            "() => document.querySelector('#qkv').shadowRoot.querySelector('#heads tr.selected th')"
            "?.textContent === 'head 1'"
        )
        np.testing.assert_allclose(bars_of(page), ref[1, 2], rtol=1e-12)
        # a τ the file holds; only those are offered
        options = page.locator("#qkv #tau option").evaluate_all("os => os.map(o => o.value)")
        assert options == ["1", "0.5"]
        page.locator("#qkv #tau").select_option("0.5")
        cooler = sc.trace(temperature=0.5).weights
        page.wait_for_function(
            f"() => Number(document.querySelector('#qkv').shadowRoot.querySelector("
            f"'#bars .bar').dataset.weight) === {float(cooler[1, 2, 0])!r}"
        )
        np.testing.assert_allclose(bars_of(page), cooler[1, 2], rtol=1e-12)
        assert page.locator("#qkv #formula math").count() == 1
        assert page.locator("#qkv #walkthrough .section").count() > 3
        assert not blocked and not errors
    finally:
        page.context.close()


def bars_of(page, host="#qkv"):
    return page.locator(f"{host} #bars .bar").evaluate_all(
        "bs => bs.map(b => Number(b.dataset.weight))"
    )


def test_exported_model_run_keeps_layer_and_head(browser, tmp_path, minilm):
    run = minilm.trace("The bank raised its rates", layers=[1, 4])
    path = tmp_path / "run.html"
    run.to_html(path)
    page, blocked, errors = offline_page(browser, path)
    try:
        page.locator("#qkv #tokens button.selected").wait_for()
        assert page.locator("#qkv button.thumb").count() == 2 * 12
        assert not page.locator("#qkv #panel-grid").is_visible()  # folded until asked for
        page.locator("#qkv button.fold-toggle[data-panel='panel-grid']").click()
        page.locator("#qkv button.thumb[data-layer='4'][data-head='9']").click()
        page.locator("#qkv button.thumb.selected[data-layer='4'][data-head='9']").wait_for()
        L = len(run.tokens)
        ref = run.layer(4).weights[9]
        np.testing.assert_allclose(bars_of(page), ref[L - 1], rtol=1e-6)
        page.locator("#qkv #tokens button").nth(1).click()
        page.locator("#qkv #tokens button.selected", has_text="the").wait_for()
        np.testing.assert_allclose(bars_of(page), ref[1], rtol=1e-6)
        assert page.locator("#qkv #layer").input_value() == "4"
        assert not blocked and not errors
    finally:
        page.context.close()


STAND_IN = """
window.models = [];
window.makeModel = (state) => {
  const handlers = {}, pending = {};
  const model = {
    saved: [],
    get: (k) => state[k],
    set: (k, v) => { pending[k] = v; },
    save_changes() { model.saved.push({ ...pending }); Object.assign(state, pending);
                     for (const k in pending) delete pending[k]; },
    on: (e, cb) => { (handlers[e] ||= []).push(cb); },
    off: (e, cb) => { handlers[e] = (handlers[e] || []).filter((f) => f !== cb); },
    push(k, v) { state[k] = v; (handlers["change:" + k] || []).forEach((cb) => cb()); },
  };
  window.models.push(model);
  return model;
};
"""


def test_widget_module_draws_and_sends_changes(browser):
    from qkv.notebook import bundle

    w = qkv.show(qkv.presets.load("bank"), select="bank")
    state = {
        "info": w.info,
        "payload": w.payload,
        "trace": w.trace,
        "error": "",
        "select": w.select,
        "temperature": w.temperature,
        "head": 0,
        "layer": 0,
    }
    url = "data:text/javascript;base64," + base64.b64encode(bundle.esm().encode()).decode()
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    errors = []
    context.route(
        "**/*",
        lambda r: r.continue_() if r.request.url.startswith(("data:", "about:")) else r.abort(),
    )
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.set_content("<div id='a'></div><div id='b'></div>")
        page.add_script_tag(content=STAND_IN)
        page.add_script_tag(
            type="module",
            content=f"""
            import widget from "{url}";
            const state = {json.dumps(state)};
            for (const id of ["a", "b"]) {{
              widget.render({{ model: makeModel(structuredClone(state)),
                              el: document.getElementById(id) }});
            }}
            window.ready = true;""",
        )
        page.wait_for_function("() => window.ready === true")
        # it draws: both views, each in its own shadow root, the engine's numbers
        for host in ("#a", "#b"):
            assert page.locator(f"{host} #tokens button").count() == 8
            assert page.locator(f"{host} #tokens button.selected").inner_text() == "bank"
            np.testing.assert_allclose(
                bars_of(page, host), qkv.presets.load("bank").trace().weights[4], rtol=1e-12
            )
        # a click sends a change through the model, in that view only
        page.locator("#b #tokens button").nth(6).click()
        assert page.evaluate("models.map(m => m.saved)") == [[], [{"select": 6}]]
        # moving τ sends the slider's value; no number is computed in the page
        page.locator("#a #tau").fill("200")
        assert page.evaluate("models[0].saved") == [{"temperature": 0.144}]
        # Python's answer (the engine's payload) is drawn when it arrives
        w.select = 6
        page.evaluate("p => models[1].push('payload', p)", w.payload)
        page.locator("#b #tokens button.selected", has_text="deposit").wait_for()
        np.testing.assert_allclose(
            bars_of(page, "#b"), qkv.presets.load("bank").trace().weights[6], rtol=1e-12
        )
        assert page.locator("#a #tokens button.selected").inner_text() == "bank"
        assert not errors
    finally:
        context.close()
