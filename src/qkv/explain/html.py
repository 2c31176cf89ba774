"""Static HTML of a trace, a scene or a model's run, for a notebook's display (``_repr_html_``).

A labelled heatmap of the weights (queries down, keys across) with a colour scale, the selected
query's row as bars, and every shape named in words ("8 queries × 8 keys"). Inline styles only
(notebook sanitizers drop <style> and <script>); cells carry their own background and ink, the
rest inherits the notebook's colours, so it reads in JupyterLab's light and dark themes.
"""

from __future__ import annotations

import html

import numpy as np

from qkv.explain.png import data_uri, ramp
from qkv.explain.walkthrough import labels

_MAX_HEADS = 8  # heatmaps drawn side by side
_MAX_SIDE = 48  # larger weights are summarised, not drawn
_NUMBERS_UP_TO = 12  # cells show their value when L and S are at most this
SELECT = "#e0b100"  # the selected row's outline (as the page's --select-line)
MASKED = "repeating-linear-gradient(45deg,rgba(128,128,128,.28) 0 3px,transparent 3px 6px)"
LINE = "rgba(128,128,128,.35)"
MUTED = "opacity:.72"
BOX = (
    "font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;"
    "color:var(--jp-ui-font-color0,inherit);line-height:1.4;max-width:100%;overflow-x:auto"
)
MONO = "font-family:var(--jp-code-font-family,ui-monospace,monospace)"
ACCENT = "var(--jp-brand-color1,#2554c7)"


def count(n: int, one: str, many: str | None = None) -> str:
    """'1 query', '6 queries'."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def shape_words(L: int, S: int, d_k, d_v, n_heads=None) -> str:
    """'6 queries × 6 keys, d_k = 2, d_v = 2' (and the heads, when there are several)."""
    heads = f"{count(n_heads, 'head')} × " if n_heads else ""
    return f"{heads}{count(L, 'query', 'queries')} × {count(S, 'key')}, d_k = {d_k}, d_v = {d_v}"


def _rgb(w: float) -> str:
    r, g, b = ramp(np.array(w))
    return f"rgb({r},{g},{b})"


def _cell(w: float, allowed: bool, label: str, numbers: bool) -> str:
    size = "min-width:34px;height:24px" if numbers else "width:14px;height:14px"
    base = f"{size};padding:0 4px;text-align:right;{MONO};font-size:11.5px"
    if not allowed:
        return (
            f"<td title='{label} · masked' style='{base};background:{MASKED};"
            f"color:inherit;text-align:center'>×</td>"
        )
    if not np.isfinite(w):
        return f"<td title='{label} = {w}' style='{base};background:#fdd;color:#900'>{w}</td>"
    ink = "#fff" if w > 0.55 else "#1d2433"
    text = f"{w:.2f}" if numbers else ""
    return (
        f"<td title='{label} = {w:.4f}' style='{base};background:{_rgb(w)};color:{ink}'>{text}</td>"
    )


def heatmap(
    w: np.ndarray,
    allowed: np.ndarray,
    rows: list[str],
    cols: list[str],
    select: int | None,
    caption: str,
) -> str:
    """One head's weights (L, S) as a table: labelled rows and columns, the selected row
    outlined, masked cells hatched with ×."""
    L, S = w.shape
    numbers = max(L, S) <= _NUMBERS_UP_TO
    th = f"font-weight:normal;{MUTED};padding:0 4px;font-size:11.5px"
    head = "".join(f"<th style='{th};text-align:center'>{html.escape(c)}</th>" for c in cols)
    body = []
    for i, r in enumerate(rows):
        on = i == select
        cells = "".join(
            _cell(
                float(w[i, j]),
                bool(allowed[i, j]),
                html.escape(f"weights[{rows[i]} → {cols[j]}]"),
                numbers,
            )
            for j in range(S)
        )
        mark = f"outline:2px solid {SELECT};outline-offset:-1px" if on else ""
        rth = f"{th};text-align:right" + (";font-weight:bold;opacity:1" if on else "")
        body.append(f"<tr style='{mark}'><th style='{rth}'>{html.escape(r)}</th>{cells}</tr>")
    return (
        f"<table style='border-collapse:separate;border-spacing:2px;display:inline-table;"
        f"margin:4px 14px 4px 0;vertical-align:top'>"
        f"<caption style='text-align:left;font-weight:600;caption-side:top'>"
        f"{html.escape(caption)}</caption>"
        f"<tr><th style='{th};text-align:left;font-size:10.5px'>query ↓ key →</th>{head}</tr>"
        f"{''.join(body)}</table>"
    )


def legend(*, masked: bool) -> str:
    """The colour scale: weight 0 → 1 on the ramp; the masked swatch when there are masks."""
    stops = ",".join(_rgb(t) for t in np.linspace(0, 1, 6))
    bar = (
        f"<span style='display:inline-block;width:160px;height:12px;vertical-align:middle;"
        f"background:linear-gradient(90deg,{stops});border:1px solid {LINE}'></span>"
    )
    parts = [
        f"<span>weight&nbsp;0&nbsp;{bar}&nbsp;1</span>",
        f"<span><span style='display:inline-block;width:14px;height:12px;"
        f"vertical-align:middle;outline:2px solid {SELECT}'></span>&nbsp;selected query</span>",
    ]
    if masked:
        parts.append(
            f"<span><span style='display:inline-block;width:14px;height:12px;"
            f"vertical-align:middle;background:{MASKED}'></span>&nbsp;× masked "
            f"(weight exactly 0)</span>"
        )
    return (
        f"<div class='qkv-legend' style='display:flex;gap:18px;flex-wrap:wrap;"
        f"font-size:12px;margin:4px 0'>{''.join(parts)}</div>"
    )


def selected_row(
    w: np.ndarray,
    allowed: np.ndarray,
    cols: list[str],
    query: str,
    z: np.ndarray | None,
    where: str = "",
) -> str:
    """The selected query's weights as bars (and its z), highest marked."""
    visible = np.where(allowed, w, -np.inf)
    top = int(np.argmax(visible)) if allowed.any() else None
    rows = []
    for j, c in enumerate(cols):
        width = 0.0 if not allowed[j] or not np.isfinite(w[j]) else 100 * float(w[j])
        value = "masked" if not allowed[j] else f"{w[j]:.3f}"
        bold = "font-weight:bold" if j == top else ""
        rows.append(
            f"<tr><th style='text-align:right;font-weight:normal;padding-right:6px;{bold}'>"
            f"{html.escape(c)}</th><td style='width:180px'><div style='background:"
            f"rgba(128,128,128,.18);height:12px;border-radius:3px'><div style='width:"
            f"{width:.1f}%;height:12px;border-radius:3px;background:{ACCENT}'></div></div></td>"
            f"<td style='{MONO};padding-left:6px;{bold}'>{value}</td></tr>"
        )
    tail = ""
    if top is not None:
        tail = (
            f"<p style='margin:4px 0'>‘{html.escape(query)}’ attends most to "
            f"‘{html.escape(cols[top])}’ (weight {w[top]:.3f}); its weights sum to "
            f"{float(np.sum(w[allowed])):.3f}.</p>"
        )
    if z is not None:
        shown = ", ".join(f"{x:.3f}" for x in z[:8]) + (", …" if len(z) > 8 else "")
        tail += (
            f"<p style='margin:4px 0'>z[{html.escape(query)}] = Σ<sub>j</sub> "
            f"w<sub>j</sub>·v<sub>j</sub> = <span style='{MONO}'>[{shown}]</span> "
            f"({count(len(z), 'value')})</p>"
        )
    return (
        f"<div style='display:inline-block;vertical-align:top;margin:4px 0'>"
        f"<div style='font-weight:600'>weights of the selected query ‘{html.escape(query)}’"
        f"{html.escape(where)}</div><table style='border-collapse:collapse;font-size:12px'>{''.join(rows)}"
        f"</table>{tail}</div>"
    )


def _one_item(trace):
    """(weights (H, L, S), allowed (H, L, S), z (H, L, d_v) or None, batch note)."""
    s = trace.settings
    heads = s.get("n_heads") or 0
    w = np.asarray(trace["weights"])
    lead = w.shape[:-3] if heads else w.shape[:-2]
    mask = s.get("mask")
    allowed = np.ones(w.shape, bool) if mask is None else np.broadcast_to(mask, w.shape)
    z = np.asarray(trace["z"]) if "z" in trace else None
    index = (0,) * len(lead)
    w, allowed = w[index], allowed[index]
    z = None if z is None else z[index]
    if not heads:
        w, allowed, z = w[None], allowed[None], None if z is None else z[None]
    note = f"batch axes {lead}: showing item {index}. " if lead else ""
    return w, allowed, z, note


def render(
    trace,
    *,
    select: int | None = None,
    head: int | None = None,
    title: str = "qkv trace",
    lesson: str = "",
    every_head: bool = True,
) -> str:
    """HTML for a trace: sizes in words, weights heatmaps with a colour scale, the selected
    query's row (default: the last query) of ``head`` (default 0)."""
    trace = trace.numpy()
    s = trace.settings
    heads = s.get("n_heads") or 0
    w, allowed, z, note = _one_item(trace)
    H, L, S = w.shape
    select = L - 1 if select is None else select
    head = 0 if head is None else head
    rows = labels(trace.tokens, L)
    cols = labels(trace.key_tokens or (trace.tokens if S == L else None), S)
    scale = s.get("scale")
    causal = s.get("causal")
    facts = [
        shape_words(L, S, s.get("d_k"), s.get("d_v"), heads or None),
        f"scale {scale:.4g}" if scale is not None else "",
        f"τ = {s.get('temperature', 1):g}",
        f"causal ({causal})" if causal else ("masked" if s.get("mask") is not None else "no mask"),
    ]
    out = trace.steps.get("out")
    if out is not None:
        o = np.asarray(out)
        facts.append(f"out: {count(o.shape[-2], 'row')} × {count(o.shape[-1], 'value')}")
    parts = [
        f"<div class='qkv-repr' style='{BOX}'>",
        f"<div style='font-weight:600;font-size:14px'>{html.escape(title)}</div>",
        f"<div style='{MUTED}'>{html.escape(' · '.join(f for f in facts if f))}</div>",
    ]
    if lesson:
        parts.append(f"<div style='{MUTED};margin:2px 0'>{html.escape(lesson)}</div>")
    parts.append(
        f"<div style='{MUTED};font-size:12px'>{html.escape(note)}steps: "
        f"{html.escape(', '.join(trace.names))}</div>"
    )
    if L > _MAX_SIDE or S > _MAX_SIDE:
        parts.append(
            f"<p>weights are {count(L, 'query', 'queries')} × {count(S, 'key')}: too "
            "large to draw here; the selected query's row follows.</p>"
        )
    else:
        parts.append(legend(masked=not allowed.all()))
        drawn = range(min(H, _MAX_HEADS)) if every_head else [head]
        for h in drawn:
            caption = f"weights, head {h}" if heads else "weights"
            parts.append(heatmap(w[h], allowed[h], rows, cols, select, caption))
        if every_head and H > _MAX_HEADS:
            parts.append(f"<p>… and {H - _MAX_HEADS} more heads (qkv.show draws them all).</p>")
    if 0 <= select < L and S <= 4 * _MAX_SIDE:
        zr = None if z is None else z[head, select]
        parts.append(
            selected_row(
                w[head, select],
                allowed[head, select],
                cols,
                rows[select],
                zr,
                f" (head {head})" if heads else "",
            )
        )
    parts.append("</div>")
    return "".join(parts)


def scene(sc) -> str:
    """A built-in scene at its defaults, its selected token's row."""
    return render(
        sc.trace(), select=sc.select, title=f"scene {sc.name}: {sc.title}", lesson=sc.lesson
    )


def model_run(run, *, layer: int | None = None, head: int = 0) -> str:
    """A model's run: every layer and head as thumbnails, then one head in full."""
    order = sorted(run.layers)
    layer = order[0] if layer is None else layer
    weights = run.weights  # (n_layers, n_heads, L, L)
    n_layers, n_heads, L, _ = weights.shape
    th = f"font-weight:normal;{MUTED};font-size:11px;padding:0 2px"
    body = []
    for h in range(n_heads):
        cells = "".join(
            f"<td style='padding:1px'><img alt='layer {order[c]}, head {h}' title='layer "
            f"{order[c]}, head {h}' src='{data_uri(ramp(weights[c, h], sqrt=True))}' "
            f"style='width:30px;height:30px;image-rendering:pixelated;border:1px solid {LINE};"
            f"{'outline:2px solid ' + SELECT if (order[c], h) == (layer, head) else ''}'></td>"
            for c in range(n_layers)
        )
        body.append(f"<tr><th style='{th};text-align:right'>h{h}</th>{cells}</tr>")
    cols = "".join(f"<th style='{th}'>{order[c]}</th>" for c in range(n_layers))
    grid = (
        f"<div style='font-weight:600;margin-top:6px'>weights of every layer and head "
        f"(shade ∝ √weight; {count(L, 'query', 'queries')} × {count(L, 'key')} each)</div>"
        f"<table style='border-collapse:separate;border-spacing:2px'><tr>"
        f"<th style='{th};text-align:left'>head ↓ layer →</th>{cols}</tr>{''.join(body)}"
        f"</table>"
    )
    detail = render(
        run.layer(layer),
        head=head,
        select=L - 1,
        every_head=False,
        title=f"layer {layer}, head {head} in full",
    )
    top = (
        f"<div style='font-weight:600;font-size:14px'>{html.escape(run.model)}: "
        f"{count(len(run.tokens), 'token')}, {count(n_layers, 'layer')} × "
        f"{count(n_heads, 'head')}</div><div style='{MUTED}'>qkv.show(run) to click through "
        "every layer, head and token</div>"
    )
    return f"<div class='qkv-repr' style='{BOX}'>{top}{grid}{detail}</div>"
