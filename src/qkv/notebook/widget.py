"""``qkv.show(obj)``: the simulator's panels as a notebook widget (anywidget).

The view is the page's own JavaScript (``bundle.esm()``, joined when this module is imported);
its state is four traits that Python and the view share: ``select`` (query token), ``temperature``
(τ), ``head`` and ``layer``. Setting any of them, from Python or by a click in the view, reruns
qkv's engine in Python and sends the new ``payload``; the view only draws it.
"""

from __future__ import annotations

import anywidget
import traitlets

from qkv.notebook import bundle
from qkv.views import why
from qkv.views.viewers import View, token_of, view_of


class AttentionWidget(anywidget.AnyWidget):
    """The panels of one scene, trace or model run; read or set ``select``, ``temperature``,
    ``head``, ``layer`` from Python, or click in the view."""

    _esm = bundle.esm()

    info = traitlets.Dict().tag(sync=True)  # sizes and controls, sent once
    payload = traitlets.Dict().tag(sync=True)  # the page's answer for the current choice
    error = traitlets.Unicode("").tag(sync=True)  # why the view's last change was refused

    select = traitlets.Int(0).tag(sync=True)
    temperature = traitlets.Float(1.0).tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)
    layer = traitlets.Int(0).tag(sync=True)

    def __init__(self, view: View, *, select: int, temperature: float, head: int, layer: int):
        self._view = view
        view.check(select=select, temperature=temperature, head=head, layer=layer)
        super().__init__(
            info=view.info(), select=select, temperature=temperature, head=head, layer=layer
        )
        self._recompute()

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
        self.payload = self._view.payload(**self._choice())
        self.error = ""

    def _handle_msg(self, msg):  # a change from the view that fails validation: say why there
        try:
            return super()._handle_msg(msg)
        except traitlets.TraitError as e:
            self.error = str(e)
            self.send_state()


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
