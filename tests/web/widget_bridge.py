"""The widget's JavaScript in Chromium joined to a real ``AttentionWidget`` in this process, as
a notebook joins them: the page's model (a small stand-in for anywidget's) sends each change
and custom message to Python through Playwright (``expose_function``); Python handles it as a
kernel does (``widget._handle_msg``) and the messages the widget publishes in answer (state
updates, custom answers with binary buffers) come back to the page. Every message is recorded
with its size (``tests/notebook/wire.py``), so a test can sum what one change costs."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebook"))
import wire  # noqa: E402

MODEL = """
window.bridged = (state) => {
  const handlers = {}, pending = {};
  const fire = (e, ...args) => (handlers[e] || []).forEach((cb) => cb(...args));
  const view = (b64) => { const u = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
                          return new DataView(u.buffer); };
  const model = {
    busy: 0,
    idleSince: 0,
    get: (k) => state[k],
    set: (k, v) => { pending[k] = v; },
    on: (e, cb) => { (handlers[e] ||= []).push(cb); },
    off: (e, cb) => { handlers[e] = (handlers[e] || []).filter((f) => f !== cb); },
    save_changes() {
      const changes = { ...pending };
      for (const k in pending) delete pending[k];
      Object.assign(state, changes);
      model.call("update", changes);
    },
    send(content) { model.call("custom", content); },
    async call(kind, body) {
      model.busy += 1;
      try {
        const replies = await window.qkvKernel(kind, JSON.stringify(body));
        for (const r of replies) {
          const buffers = r.buffers.map(view);
          if (r.method === "custom") { fire("msg:custom", r.content, buffers); continue; }
          const changed = { ...r.state };
          (r.buffer_paths || []).forEach(([k], j) => { changed[k] = buffers[j]; });
          Object.assign(state, changed);
          for (const k of Object.keys(changed)) fire("change:" + k);
        }
      } finally { model.busy -= 1; model.idleSince = performance.now(); }
    },
  };
  return model;
};
"""


class Bridge:
    """One widget joined to one page; ``sent`` counts the messages the widget published."""

    def __init__(self, widget):
        self.widget = widget

    @property
    def sent(self) -> int:
        return len(self.widget.comm.sent)

    def bytes_since(self, start: int) -> int:
        return wire.sent_since(self.widget, start)

    def handle(self, kind: str, body: str) -> list[dict]:
        """A message from the page, handled as a kernel does; the widget's replies."""
        start = self.sent
        data = json.loads(body)
        if kind == "update":
            msg = {"method": "update", "state": data, "buffer_paths": []}
        else:
            msg = {"method": "custom", "content": data}
        self.widget._handle_msg({"content": {"data": msg}, "buffers": []})
        return [
            {
                "method": d.get("method"),
                "state": d.get("state"),
                "buffer_paths": d.get("buffer_paths"),
                "content": d.get("content"),
                "buffers": [base64.b64encode(bytes(b)).decode() for b in buffers],
            }
            for _, d, buffers in self.widget.comm.sent[start:]
        ]

    def state(self) -> dict:
        """The state the page starts from: what the widget's comm opened with, as the page
        gets it (binary values as base64, turned back into DataViews there)."""
        _, data, buffers = self.widget.comm.sent[0]
        state = dict(data["state"])
        for (key, *_), b in zip(data["buffer_paths"], buffers, strict=True):
            state[key] = base64.b64encode(bytes(b)).decode()
        for _, d, bufs in self.widget.comm.sent[1:]:  # updates sent before the page opened
            state.update(d.get("state") or {})
            for (key, *_), b in zip(d.get("buffer_paths") or [], bufs, strict=True):
                state[key] = base64.b64encode(bytes(b)).decode()
        return state


def offline_page(browser, width: int):
    """A page that reaches nothing outside itself, the widget's bundled module as a data: URL
    and the page's errors as they come; (page, module url, errors)."""
    from qkv.notebook import bundle

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
    return page, url, errors


def open_bridged(browser, widget, *, width: int = 1100):
    """A page with the widget's module rendered into #a, joined to ``widget``;
    (page, bridge, errors)."""
    bridge = Bridge(widget)
    state = bridge.state()
    binary = [k for k in ("picture",) if isinstance(state.get(k), str)]
    page, url, errors = offline_page(browser, width)
    page.expose_function("qkvKernel", bridge.handle)
    page.set_content("<div id='a'></div>")
    page.add_script_tag(content=MODEL)
    page.add_script_tag(
        type="module",
        content=f"""import widget from "{url}";
        const state = {json.dumps(state)};
        for (const k of {json.dumps(binary)}) {{
          const u = Uint8Array.from(atob(state[k]), (c) => c.charCodeAt(0));
          state[k] = new DataView(u.buffer);
        }}
        window.model = bridged(state);
        widget.render({{ model, el: document.getElementById("a") }});
        window.ready = true;""",
    )
    page.wait_for_function("() => window.ready === true")
    return page, bridge, errors


def settle(page, quiet_ms: int = 300, timeout: float = 60_000) -> None:
    """Waits until no message has been in flight for ``quiet_ms``."""
    page.wait_for_function(
        f"() => !window.model.busy && performance.now() - window.model.idleSince > {quiet_ms}",
        polling=50,
        timeout=timeout,
    )
