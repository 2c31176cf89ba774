"""The widget's JavaScript in Chromium, driven by a stand-in for anywidget's model: compact by
default (at most 900 px tall until a panel is opened, for a scene, a 32-token run and a long
text), panels that open and fold, and a view whose kernel does not answer (a notebook opened
with its saved widgets) that says so in words and shows the picture the kernel drew."""

from __future__ import annotations

import base64
import json

import pytest

import qkv

pytest.importorskip("anywidget", reason="the notebook extra is not installed")

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
    from qkv.notebook import bundle

    state = {k: getattr(w, k) for k in ("info", "payload", "trace", "error", "select")}
    state.update(temperature=w.temperature, head=w.head, layer=w.layer)
    state["picture"] = base64.b64encode(w.picture).decode()
    url = "data:text/javascript;base64," + base64.b64encode(bundle.esm().encode()).decode()
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.route(
        "**/*",
        lambda r: (
            r.continue_() if r.request.url.startswith(("data:", "about:", "blob:")) else r.abort()
        ),
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
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
def test_compact_until_a_panel_is_opened(browser, minilm, width):
    short = minilm.trace(" ".join(LONG.split()[:30]))  # 32 tokens with [CLS] and [SEP]
    long = minilm.trace(LONG)
    assert len(short.tokens) == 32 and len(long.tokens) > 100
    for obj in (qkv.presets.load("bank"), short, long):
        w = qkv.show(obj)
        page, errors = open_widget(browser, w, answers=True, width=width)
        try:
            page.locator("#a .fold-toggle").first.wait_for()
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


def test_without_a_kernel_the_view_says_so_and_shows_its_picture(browser):
    w = qkv.show(qkv.presets.load("bank"), select="bank")
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
        assert page.evaluate("model.sent.map(m => m.ask)") == ["hello"]
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
