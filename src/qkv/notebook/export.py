"""``to_html(obj, path)`` and ``qkv export``: the notebook view as one self-contained HTML file.

The file holds the page's JavaScript (``bundle.esm``), its styles and every payload it can
offer, inline: each query token × head (× layer) at each τ asked for, computed now by qkv's
engine. Opened offline in any browser it keeps the selection of token, head and layer; a τ that
was not computed is not offered. A trace shared by many choices is stored once.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
from pathlib import Path

import numpy as np

from qkv.notebook import bundle
from qkv.trace import finite_or_text
from qkv.views import why
from qkv.views.viewers import View, token_of, view_of

HERE = Path(__file__).resolve().parent
MAX_PAYLOADS = 20_000  # token × head × layer × τ choices one file may hold


def _short(trace_dict: dict) -> dict:
    """float32 steps written with float32's shortest digits (the same float32 numbers read
    back; float64 steps are left as they are)."""
    steps = {}
    for name, a in trace_dict["steps"].items():
        if a["dtype"] == "float32":
            a = {**a, "data": _float32_text(a["data"])}
        steps[name] = a
    return {**trace_dict, "steps": steps}


def _float32_text(data):
    """Nested lists of float32 values -> the same values with float32's shortest digits."""
    x = np.asarray(_numbers(data), dtype=np.float32)
    return finite_or_text(x.astype(str).astype(np.float64).tolist())


def _numbers(x):
    return [_numbers(e) for e in x] if isinstance(x, list) else float(x)


def table(
    view: View,
    *,
    temperatures=None,
    select: int | None = None,
    head: int = 0,
    layer: int | None = None,
) -> dict:
    """Every payload the file offers, traces stored once: {info, scene, start, traces, rows}."""
    taus = [view.temperature] if not temperatures else [float(t) for t in temperatures]
    taus = list(dict.fromkeys(taus))
    layers = view.layers if view.layers is not None else [0]
    heads = range(view.n_heads or 1)
    n = len(taus) * len(layers) * len(heads) * len(view.tokens)
    if n > MAX_PAYLOADS:
        raise ValueError(
            f"the file would hold {n} choices (τ values × layers × heads × tokens "
            f"= {len(taus)} × {len(layers)} × {len(heads)} × {len(view.tokens)}), "
            f"more than {MAX_PAYLOADS}: choose fewer layers or τ values"
        )
    for t in taus:
        view.check(select=0, temperature=t, head=0, layer=layers[0])
    first = view.select if select is None else token_of(view, select)
    first_layer = layers[0] if layer is None else layer
    view.check(select=first, temperature=taus[0], head=head, layer=first_layer)
    start = {"select": first, "temperature": taus[0], "head": head, "layer": first_layer}
    traces: list[dict] = []
    seen: dict[int, int] = {}  # id(trace dict) -> index in traces
    sections: dict[str, int] = {}  # a walkthrough section (as JSON) -> its index: most repeat
    rows = {}
    f32 = view.dtype == np.float32
    for ti, t in enumerate(taus):
        for lay in layers:
            for hd in heads:
                for i in range(len(view.tokens)):
                    p = view.payload(select=i, temperature=t, head=hd, layer=lay)
                    key = id(p["trace"])
                    if key not in seen:
                        seen[key] = len(traces)
                        traces.append(_short(p["trace"]))
                    walk = [
                        sections.setdefault(json.dumps(sec), len(sections))
                        for sec in p["walkthrough"]
                    ]
                    sel = p["selected"]
                    if f32:
                        sel = {**sel, "contributions": _float32_text(sel["contributions"])}
                    rows[f"{ti}|{lay}|{hd}|{i}"] = {
                        "settings": p["settings"],
                        "trace": seen[key],
                        "selected": sel,
                        "walkthrough": walk,
                    }
    why = (
        "this file holds the numbers at "
        + ("τ = " + ", ".join(f"{t:g}" for t in taus))
        + " only; export with --temperature (repeatable) for more"
    )
    info = {**view.info(), "tau": {"fixed": None, "values": taus, "why": why}}
    return {
        "info": info,
        "scene": {"tokens": view.tokens, "d_model": view.d_model},
        "start": start,
        "traces": traces,
        "rows": rows,
        "sections": [json.loads(sec) for sec in sections],
    }


def document(data: dict, *, title: str) -> str:
    """The HTML text: styles and scripts of the view, and ``data`` (JSON, gzip, base64: the
    walkthroughs' text repeats), all inline."""
    script = bundle.esm(export=False) + "\n" + (HERE / "offline.js").read_text()
    payload = json.dumps(data, allow_nan=False, separators=(",", ":")).encode()
    packed = base64.b64encode(gzip.compress(payload, 6, mtime=0)).decode()
    return _PAGE.format(
        title=html.escape(title), data=packed, script=script.replace("</script", "<\\/script")
    )


def to_html(
    obj,
    path=None,
    *,
    temperatures=None,
    select=None,
    head: int = 0,
    layer: int | None = None,
    title: str | None = None,
    patching=None,
) -> str:
    """Write ``obj`` (a scene, a Trace or a model's run) as one self-contained HTML file; for a
    ``qkv.hf.attribute`` result, its "why this token" panel (with ``patching``, a
    ``qkv.hf.patching`` result of the same prompt), every head's split embedded.

    temperatures: the τ values to precompute (default: the object's own); select, head,
    layer: what the file opens on. Returns the HTML text; writes it to ``path`` when given.
    """
    if why.is_attribution(obj):
        panel = why.panel(obj, patching)
        data: dict = {"info": {"kind": "why", "why": panel}}
        text = document(data, title=title or f"qkv · why {panel['target']['label']}?")
    else:
        why.check_not_patching(obj, patching)
        view = view_of(obj)
        data = table(view, temperatures=temperatures, select=select, head=head, layer=layer)
        text = document(data, title=title or f"qkv · {view.title}")
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="data:,">
<style>body {{ margin: 0; padding: 16px; background: #e9edf3; }}</style>
</head>
<body>
<div id="qkv"></div>
<noscript>This file draws its panels with JavaScript; allow scripts to see them.</noscript>
<script type="application/octet-stream" id="qkv-data" data-encoding="json gzip base64">{data}</script>
<script type="module">
{script}
</script>
</body>
</html>
"""
