"""Self-contained HTML for a trace (notebook display): settings, weight heatmaps, output."""

from __future__ import annotations

import html

import numpy as np

from qkv.explain.walkthrough import labels

_MAX_HEADS = 8
_MAX_SIDE = 48


def _cell(w: float, visible: bool) -> str:
    if not visible:
        return '<td style="background:#eee;color:#aaa;text-align:center" title="masked">·</td>'
    if not np.isfinite(w):
        return f'<td style="background:#fdd" title="{w}">{w}</td>'
    shade = int(255 - 200 * min(max(w, 0.0), 1.0))
    ink = "#fff" if w > 0.6 else "#000"
    return (f'<td style="background:rgb({shade},{shade},255);color:{ink};text-align:right" '
            f'title="{w:.6g}">{w:.2f}</td>')


def _heatmap(w: np.ndarray, mask, rows, cols, caption: str) -> str:
    head = "".join(f"<th>{c}</th>" for c in cols)
    body = []
    for i, r in enumerate(rows):
        cells = "".join(_cell(float(w[i, j]), bool(mask[i, j])) for j in range(len(cols)))
        body.append(f"<tr><th style='text-align:right'>{r}</th>{cells}</tr>")
    return (f"<table style='border-collapse:collapse;font-family:monospace;font-size:12px;"
            f"display:inline-table;margin:4px 12px 4px 0'><caption>{caption}</caption>"
            f"<tr><th>q \\ k</th>{head}</tr>{''.join(body)}</table>")


def render(trace) -> str:
    """HTML for a NumPy trace: one weights heatmap per head (first batch item), then `out`."""
    s = trace.settings
    w = trace.steps["weights"]
    lead = w.shape[:-2]
    heads = s.get("n_heads") or 0
    # Take the first item of every batch axis so one (heads, L, S) block remains.
    while w.ndim > (3 if heads else 2):
        w = w[0]
    if not heads:
        w = w[None]
    mask = s.get("mask")
    full = np.ones(w.shape[-2:], bool) if mask is None else np.broadcast_to(
        mask, lead + w.shape[-2:])
    while full.ndim > (3 if heads else 2):
        full = full[0]
    if full.ndim == 2:
        full = np.broadcast_to(full, w.shape)
    L, S = w.shape[-2:]
    rows = [html.escape(t) for t in labels(trace.tokens, L)]
    cols = [html.escape(t) for t in labels(trace.key_tokens or trace.tokens, S)]
    parts = [
        "<div style='font-family:sans-serif'>",
        "<b>qkv trace</b> — steps: " + ", ".join(trace.names),
        "<br><code>" + html.escape(
            f"scale={s.get('scale'):.6g}  τ={s.get('temperature')}  causal={s.get('causal')}  "
            f"L={s.get('L')}  S={s.get('S')}  d_k={s.get('d_k')}  d_v={s.get('d_v')}  "
            f"heads={s.get('n_heads')}  kv_heads={s.get('n_kv_heads')}") + "</code><br>",
    ]
    if L > _MAX_SIDE or S > _MAX_SIDE:
        parts.append(f"<p>weights are {L}×{S}: too large to draw here; read trace['weights'].</p>")
    else:
        for h in range(min(w.shape[0], _MAX_HEADS)):
            caption = f"weights, head {h}" if heads else "weights"
            parts.append(_heatmap(w[h], full[h], rows, cols, caption))
    out = trace.steps.get("out")
    if out is not None:
        parts.append(f"<p><b>out</b> shape {tuple(out.shape)}</p>")
    parts.append("</div>")
    return "".join(parts)
