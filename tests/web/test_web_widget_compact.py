"""The widget's JavaScript in Chromium, driven by a stand-in for anywidget's model: compact by
default (at most 900 px tall until a panel is opened, for a scene, a 32-token run and a long
text), panels that open and fold, and a view whose kernel does not answer (a notebook opened
with its saved widgets) that says so in words and shows the picture the kernel drew."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

import qkv

pytest.importorskip("anywidget", reason="the notebook extra is not installed")

from widget_bridge import offline_page, open_bridged, settle, wire  # noqa: E402

MAX_HEIGHT = 900  # px, every panel folded but the first ones

STAND_IN = """
window.makeModel = (state, answers) => {
  const handlers = {};
  const fire = (e, ...args) => (handlers[e] || []).forEach((cb) => cb(...args));
  const bytes = Uint8Array.from(atob(state.picture), (c) => c.charCodeAt(0));
  state = { ...state, picture: new DataView(bytes.buffer) };
  return {
    sent: [],
    get: (k) => state[k], set: (k, v) => { state[k] = v; }, save_changes() {},
    on: (e, cb) => { (handlers[e] ||= []).push(cb); },
    off: (e, cb) => { handlers[e] = (handlers[e] || []).filter((f) => f !== cb); },
    send(content) {
      this.sent.push(content);
      if (answers) setTimeout(() => fire("msg:custom", { id: content.id, ask: content.ask }, []), 10);
    },
  };
};
"""


def open_widget(browser, w, *, answers: bool, width: int = 1100):
    """The widget's module rendered into #a of a blank page; (page, errors)."""
    state = {k: getattr(w, k) for k in ("info", "payload", "trace", "error", "select")}
    state.update(temperature=w.temperature, head=w.head, layer=w.layer)
    state["picture"] = base64.b64encode(w.picture).decode()
    page, url, errors = offline_page(browser, width)
    page.set_content("<div id='a'></div>")
    page.add_script_tag(content=STAND_IN)
    page.add_script_tag(
        type="module",
        content=f"""import widget from "{url}";
        window.model = makeModel({json.dumps(state)}, {json.dumps(answers)});
        widget.render({{ model, el: document.getElementById("a") }});
        window.ready = true;""",
    )
    page.wait_for_function("() => window.ready === true")
    return page, errors


def height(page) -> float:
    return page.evaluate("document.getElementById('a').getBoundingClientRect().height")


LONG = " ".join(["the bank raised its rates and the river bank flooded after the rain"] * 12)


@pytest.mark.parametrize("width", [1100, 700])
def test_compact_until_a_panel_is_opened(browser, minilm, width, monkeypatch):
    short = minilm.trace(" ".join(LONG.split()[:30]))  # 32 tokens with [CLS] and [SEP]
    long = minilm.trace(LONG)
    assert len(short.tokens) == 32 and len(long.tokens) > 100
    wire.recording(monkeypatch)
    for obj in (qkv.presets.load("bank"), short, long):
        w = qkv.show(obj)
        page, _, errors = open_bridged(browser, w, width=width)  # a real kernel answers
        try:
            page.locator("#a .fold-toggle").first.wait_for()
            settle(page)
            folded = height(page)
            assert 200 < folded <= MAX_HEIGHT, (w.view.title, folded)
            # every panel the view has is named in the toggles; a toggle opens its panel
            toggles = page.locator("#a .fold-toggle")
            names = toggles.evaluate_all("ts => ts.map(t => t.dataset.panel)")
            closed = [n for n in names if not page.locator(f"#a #{n}").is_visible()]
            assert closed, "some panels start folded"
            toggles.nth(names.index(closed[-1])).click()
            assert page.locator(f"#a #{closed[-1]}").is_visible()
            assert height(page) > folded
            # its heading folds it again
            page.locator(f"#a #{closed[-1]} h2 button.fold").click()
            assert not page.locator(f"#a #{closed[-1]}").is_visible()
            assert height(page) == pytest.approx(folded, abs=1)
            assert not errors
        finally:
            page.context.close()


@pytest.mark.parametrize("long", [False, True])
def test_without_a_kernel_the_view_says_so_and_shows_its_picture(browser, minilm, long):
    w = qkv.show(minilm.trace(LONG)) if long else qkv.show(qkv.presets.load("bank"), select="bank")
    page, errors = open_widget(browser, w, answers=False)
    try:
        notice = page.locator("#a #kernel-gone")
        notice.wait_for(state="visible", timeout=10_000)
        assert "No kernel answers" in notice.inner_text()
        assert "run the cell again" in notice.inner_text()
        img = page.locator("#a #picture")
        assert img.is_visible()
        size = img.evaluate("i => [i.naturalWidth, i.naturalHeight]")
        assert size == [w.view.picture(**w._choice()).width, w.view.picture(**w._choice()).height]
        asked = page.evaluate("model.sent.map(m => m.ask)")
        assert asked[0] == "hello" and set(asked) <= {"hello", "overview", "row"}
        if long:  # the zooming heatmap, whose numbers no kernel sends, gives way to the picture
            assert not page.locator("#a #zoom-root").is_visible()
        assert not errors
    finally:
        page.context.close()


def test_with_a_kernel_no_notice_and_no_picture_over_the_panels(browser):
    w = qkv.show(qkv.presets.load("bank"), select="bank")
    page, errors = open_widget(browser, w, answers=True)
    try:
        page.wait_for_function(
            "() => document.querySelector('#a').shadowRoot.querySelector('#still')"
            ".dataset.kernel === 'answers'"
        )
        assert not page.locator("#a #kernel-gone").is_visible()
        assert not page.locator("#a #picture").is_visible()
        assert not errors
    finally:
        page.context.close()


def test_a_long_run_pools_every_head_when_its_grid_opens(browser, minilm, monkeypatch):
    run = minilm.trace(LONG)
    wire.recording(monkeypatch)
    w = qkv.show(run)
    assert w.info["long"] and w.info["grid"] is None  # not in the first state
    page, bridge, errors = open_bridged(browser, w)
    try:
        settle(page)
        before = bridge.sent
        page.locator("#a button.fold-toggle[data-panel='panel-grid']").click()
        page.locator("#a button.thumb").first.wait_for()
        assert page.locator("#a button.thumb").count() == 6 * 12
        asked = [d["content"]["ask"] for _, d, _ in w.comm.sent[before:] if "content" in d]
        assert asked == ["thumbnails"]
        page.locator("#a button.thumb[data-layer='4'][data-head='9']").click()
        page.locator("#a button.thumb.selected[data-layer='4'][data-head='9']").wait_for()
        settle(page)
        assert (w.layer, w.head) == (4, 9)
        # the thumbnail of a head is its weights max-pooled: its darkest pixel where they peak
        px = page.locator("#a button.thumb[data-layer='4'][data-head='9'] canvas").evaluate(
            """c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                      const dark = []; for (let i = 0; i < d.length; i += 4)
                        dark.push(765 - d[i] - d[i + 1] - d[i + 2]);
                      return [c.width, c.height, dark]; }"""
        )
        cols, rows, dark = px
        f = -(-len(run.tokens) // 32)
        assert (rows, cols) == (-(-len(run.tokens) // f),) * 2
        weights = run.layer(4)["weights"][9]  # (L, L)
        L = len(weights)
        pad = np.zeros((rows * f, cols * f))
        pad[:L, :L] = weights
        pooled = pad.reshape(rows, f, cols, f).max(axis=(1, 3))
        dark = np.array(dark).reshape(rows, cols)
        shade = np.rint(255 * np.sqrt(pooled))  # the thumbnails' one byte a cell
        assert shade[np.unravel_index(dark.argmax(), dark.shape)] == shade.max()
        assert not errors
    finally:
        page.context.close()
