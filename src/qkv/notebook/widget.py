"""``qkv.show(obj)``: the simulator's panels as a notebook widget (anywidget).

The view is the page's own JavaScript (``bundle.esm()``, joined when this module is imported);
its state is four traits that Python and the view share: ``select`` (query token), ``temperature``
(τ), ``head`` and ``layer``. Setting any of them, from Python or by a click in the view, reruns
qkv's engine in Python and sends the new ``payload``; the view only draws it. Up to
``long_text.PANEL_TOKENS`` tokens the payload is the page's answer, its ``trace`` (every number
of one head) apart, sent only when it changes; past it, the selected row in numbers, and the
view asks for what it draws (``requests``: custom messages answered with binary buffers).

``picture`` (PNG bytes, ``views.picture``) is the current view as a still image: the display
bundle carries it too, so a saved notebook, nbconvert's HTML and GitHub show it without a
kernel, and the view shows it, saying why, when no kernel answers.
"""

from __future__ import annotations

import base64

import anywidget
import traitlets

from qkv.notebook import bundle, requests
from qkv.views import why
from qkv.views.picture import Picture
from qkv.views.viewers import View, token_of, view_of


class AttentionWidget(anywidget.AnyWidget):
    """The panels of one scene, trace or model run; read or set ``select``, ``temperature``,
    ``head``, ``layer`` from Python, or click in the view."""

    _esm = bundle.esm()

    info = traitlets.Dict().tag(sync=True)  # sizes and controls, sent once
    payload = traitlets.Dict().tag(sync=True)  # what the view draws for the current choice
    trace = traitlets.Dict().tag(sync=True)  # the head shown (Trace.to_dict), up to 32 tokens
    picture = traitlets.Bytes(b"").tag(sync=True)  # the current view as PNG (views.picture)
    error = traitlets.Unicode("").tag(sync=True)  # why the view's last change was refused

    select = traitlets.Int(0).tag(sync=True)
    temperature = traitlets.Float(1.0).tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)
    layer = traitlets.Int(0).tag(sync=True)

    def __init__(self, view: View, *, select: int, temperature: float, head: int, layer: int):
        self._view = view
        self._drawn: tuple[dict, Picture] | None = None  # the last picture drawn
        view.check(select=select, temperature=temperature, head=head, layer=layer)
        super().__init__(
            info=view.info(), select=select, temperature=temperature, head=head, layer=layer
        )
        self._recompute()
        self.on_msg(self._on_request)

    @property
    def view(self) -> View:
        return self._view

    def _choice(self, **changed) -> dict:
        now = {
            "select": self.select,
            "temperature": self.temperature,
            "head": self.head,
            "layer": self.layer,
        }
        return {**now, **changed}

    # A value the view cannot show is refused with the view's own message (TraitError).
    @traitlets.validate("select", "temperature", "head", "layer")
    def _valid(self, proposal):
        name, value = proposal["trait"].name, proposal["value"]
        if getattr(self, "_view", None) is not None:
            try:
                self._view.check(**self._choice(**{name: value}))
            except ValueError as e:
                raise traitlets.TraitError(str(e)) from None
        return value

    @traitlets.observe("select", "temperature", "head", "layer")
    def _changed(self, change):
        if getattr(self, "_view", None) is not None:
            self._recompute()

    def _recompute(self) -> None:
        choice = self._choice()
        with self.hold_sync():  # one message for the three
            if self._view.long:
                self.payload = self._view.brief(**choice)
            else:  # the trace travels only when τ, head or layer change it
                payload = self._view.payload(**choice)
                self.trace = payload.pop("trace")
                self.payload = payload
            self.picture = self._picture().png
            self.error = ""

    def _picture(self):
        """The picture of the current choice (drawn once per choice)."""
        choice = self._choice()
        if self._drawn is None or self._drawn[0] != choice:
            self._drawn = (choice, self._view.picture(**choice))
        return self._drawn[1]

    def _handle_msg(self, msg):  # a change from the view that fails validation: say why there
        try:
            return super()._handle_msg(msg)
        except traitlets.TraitError as e:
            self.error = str(e)
            self.send_state()

    def _on_request(self, _widget, content, buffers) -> None:
        """A custom message from the view: answered with the same id (``requests.answer``)."""
        reply, out = requests.answer(self, content)
        self.send(reply, buffers=out)

    def words(self) -> str:
        """The view in words: what it shows and what the picture holds."""
        c, v = self._choice(), self._view
        where = ", ".join(
            part
            for part in (
                f"layer {c['layer']}" if v.layers is not None else "",
                f"head {c['head']}" if v.n_heads else "",
                f"τ = {c['temperature']:g}",
                f"query {c['select']} ({v.tokens[c['select']]})",
            )
            if part
        )
        return f"qkv.show: {v.title} · {where}. Picture: {self._picture().words()}."

    def _repr_mimebundle_(self, **kwargs):
        """The widget, and beside it the current view as a PNG and in words, for front ends
        that show no widget (a saved notebook without its kernel, nbconvert, GitHub)."""
        data, metadata = super()._repr_mimebundle_(**kwargs) or ({}, {})
        pic = self._picture()
        self.picture = pic.png
        data["image/png"] = base64.b64encode(pic.png).decode()
        data["text/plain"] = self.words()
        metadata = {**metadata, "image/png": {"width": pic.width, "height": pic.height}}
        return data, metadata


class WhyWidget(anywidget.AnyWidget):
    """The "why this token" panel of a ``qkv.hf.attribute`` result (``qkv.views.why.panel``,
    computed once and sent whole): a click on a head shows its per-key split in the view, with
    no round trip, so it keeps working in a saved notebook. ``panel`` holds the numbers drawn."""

    _esm = bundle.esm()

    info = traitlets.Dict().tag(sync=True)  # {"kind": "why", "why": the panel}

    def __init__(self, attribution, patching=None):
        super().__init__(info={"kind": "why", "why": why.panel(attribution, patching)})

    @property
    def panel(self) -> dict:
        return self.info["why"]


def show(
    obj,
    *,
    select=None,
    temperature: float | None = None,
    head: int = 0,
    layer: int | None = None,
    patching=None,
) -> AttentionWidget | WhyWidget:
    """The interactive panels of a scene, a ``Trace`` or a model's run, as a notebook widget;
    for a ``qkv.hf.attribute`` result, its "why this token" panel (``patching``: a
    ``qkv.hf.patching`` result of the same prompt, to colour the heads by).

    select: query token (index or text; default: the scene's, or the last token);
    temperature: τ (default: the object's own); head, layer: which head (and layer of a model)
    the panels show. Read or set ``w.select``, ``w.temperature``, ``w.head``, ``w.layer`` later.
    As a cell's last expression it displays itself.
    """
    if why.is_attribution(obj):
        return WhyWidget(obj, patching)
    why.check_not_patching(obj, patching)
    view = view_of(obj)
    return AttentionWidget(
        view,
        select=view.select if select is None else token_of(view, select),
        temperature=view.temperature if temperature is None else float(temperature),
        head=head,
        layer=(view.layers[0] if view.layers else 0) if layer is None else layer,
    )
