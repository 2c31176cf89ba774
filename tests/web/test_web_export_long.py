"""A long text's exported file in Chromium, opened from disk with every network request blocked:
it draws the zooming heatmap of the chosen head from the file's own numbers (the overview is
the weights max-pooled by hand here), names the selected query's heaviest keys, switches heads,
pools every head for the grid, says what it leaves out, and refuses in words a zoom into exact
numbers it does not hold."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("anywidget", reason="the notebook extra is not installed")

from test_web_notebook import offline_page  # noqa: E402

from qkv.notebook import export_long  # noqa: E402

TEXT = " ".join(["the bank raised its rates and the river bank flooded after the rain"] * 22)
# the view's zoom api; undefined (not an error) until the file has read its numbers and drawn
ZOOM = "document.querySelector('#qkv')?.shadowRoot?.querySelector('#zoom-root')?.zoom"


def shade(w: np.ndarray, size: int) -> np.ndarray:
    f = -(-max(w.shape) // size)
    R, K = -(-w.shape[0] // f), -(-w.shape[1] // f)
    pad = np.zeros((R * f, K * f))
    pad[: w.shape[0], : w.shape[1]] = w
    return np.rint(255 * np.sqrt(pad.reshape(R, f, K, f).max(axis=(1, 3))))


def overview_of(page) -> np.ndarray:
    shape = page.evaluate(f"() => {ZOOM}.state.ov.header.shape")
    return np.array(page.evaluate(f"() => Array.from({ZOOM}.state.ov.data)")).reshape(shape)


def test_a_long_export_opens_offline_and_draws(browser, minilm, tmp_path):
    run = minilm.trace(TEXT, layers=[1, 4])
    L = len(run.tokens)
    path = tmp_path / "long.html"
    run.to_html(path, select=40, head=2, layer=4)
    page, blocked, errors = offline_page(browser, path)
    try:
        page.wait_for_function(f"() => ({ZOOM}?.state.redraws ?? 0) > 0 && {ZOOM}?.state.rowData")
        assert "leaves out" in page.locator("#qkv #lesson").inner_text()
        assert page.locator("#qkv #query").input_value() == "40"
        w = np.asarray(run.layer(4)["weights"][2], dtype=np.float64)
        np.testing.assert_array_equal(overview_of(page), shade(w, export_long.OVERVIEW))
        # the canvas is drawn: its pixels vary
        spread = page.evaluate(
            f"""() => {{ const c = {ZOOM}.state.ovImg;
              const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
              return Math.max(...d.filter((_, i) => i % 4 === 2)) -
                     Math.min(...d.filter((_, i) => i % 4 === 2)); }}"""
        )
        assert spread > 50
        # the selected query's heaviest keys, named under the strip
        keys = page.locator("#qkv .zoom-key").evaluate_all("ks => ks.map(k => +k.dataset.index)")
        best = np.argsort(-w[40], kind="stable")[: export_long.TOP]
        assert sorted(w[40][keys]) == pytest.approx(sorted(w[40][best]), rel=1e-6)
        # another head of another layer, from the controls
        page.locator("#qkv #layer").select_option("1")
        page.locator("#qkv #head").select_option("7")
        w17 = np.asarray(run.layer(1)["weights"][7], dtype=np.float64)
        want = shade(w17, export_long.OVERVIEW)
        page.wait_for_function(  # until the overview drawn is that head's, every cell
            f"want => {{ const d = {ZOOM}?.state.ov?.data;"
            " return d && d.length === want.length && want.every((v, i) => d[i] === v); }",
            arg=want.astype(int).ravel().tolist(),
        )
        np.testing.assert_array_equal(overview_of(page), want)
        # zooming to a few cells asks for exact numbers the file does not hold: said in words
        page.evaluate(f"() => {ZOOM}.show(100, 108, 100, 108)")
        error = page.locator("#qkv #error")
        error.wait_for(state="visible")
        assert "not the exact weights of a zoomed-in region" in error.inner_text()
        # every head, pooled from the file's overviews
        page.locator("#qkv button.fold-toggle[data-panel='panel-grid']").click()
        page.locator("#qkv button.thumb").first.wait_for()
        assert page.locator("#qkv button.thumb").count() == 2 * 12
        assert L > export_long.OVERVIEW and not blocked and not errors
    finally:
        page.context.close()
