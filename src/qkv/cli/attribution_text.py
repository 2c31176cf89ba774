"""``qkv attribute``'s report as sections (rich, plain or Markdown), from the JSON it prints."""

from __future__ import annotations

import numpy as np

from qkv.explain.format import Section, Table, section
from qkv.explain.tokens import labels, visible
from qkv.hf.attribution import top_heads
from qkv.hf.attribution_plot import describe

SHOWN_KEYS = 3  # keys named per split head


def sections(report: dict, top: int) -> list[Section]:
    """Summary, top heads (with their keys), top MLPs, patching (when given), logit lens."""
    tokens, pos = report["tokens"], report["position"]
    names = labels(tokens, len(tokens))
    heads = np.array(report["heads"])
    patching = report["patching"]
    total = report["embed"] + heads.sum() + sum(report["mlp"]) + report["rest"]
    out = [
        section(
            f"{report['model']}: {describe(report)} after {report['text']!r}",
            f"= {report['logit_diff']:.4f} at position {pos} ({names[pos]}), the model's own",
            f"= embeddings {report['embed']:+.4f} + heads {heads.sum():+.4f} + MLPs "
            f"{sum(report['mlp']):+.4f} + biases {report['rest']:+.4f} (sum {total:.4f})",
            "Each share is that part read through the final norm with the real final "
            "residual's scale held fixed, so the shares add up.",
        )
    ]
    splits = {(s["layer"], s["head"]): s for s in report["by_key"]}
    rows = []
    for layer, head, value in top_heads(heads, top):
        split = splits.get((layer, head))
        keys = "" if split is None else _keys(split, names)
        cells = [f"{layer}.{head}", f"{value:+.4f}"]
        if patching:
            cells.append(f"{patching['heads'][layer][head]:+.3f}")
        rows.append((*cells, keys))
    columns = ("head", "share") + (("patched",) if patching else ()) + ("keys it read most",)
    out.append(section(f"top {top} heads by |share|", Table(columns, tuple(rows))))
    mlp = np.array(report["mlp"])
    order = np.argsort(-np.abs(mlp), kind="stable")[:top]
    mlp_rows = tuple((str(int(i)), f"{mlp[i]:+.4f}") for i in order)
    out.append(section(f"top {len(mlp_rows)} MLPs by |share|", Table(("layer", "share"), mlp_rows)))
    if patching:
        out.append(_patching(patching, top, names))
    out.append(_lens(report))
    return out


def _keys(split: dict, names: list[str]) -> str:
    parts = np.array(split["parts"])
    order = np.argsort(-np.abs(parts), kind="stable")[:SHOWN_KEYS]
    return ", ".join(f"{names[j]} {parts[j]:+.3f} (w {split['weights'][j]:.2f})" for j in order)


def _patching(patching: dict, top: int, names: list[str]) -> Section:
    grid = np.array(patching["heads"])
    rows = tuple((f"{i}.{h}", f"{v:+.3f}") for i, h, v in top_heads(grid, top))
    blocks: list = [
        f"LD clean {patching['clean']:.4f}, corrupted {patching['corrupted']:.4f}; a score is "
        f"(LD_patched − LD_corrupted) / (LD_clean − LD_corrupted): 1 = the clean answer back",
        Table(("head", "z patched"), rows),
    ]
    if patching.get("residual") is not None:
        res = np.array(patching["residual"])
        where = [(i, j, res[i, j]) for i, j, _ in top_heads(res, top)]
        residual = tuple((str(i), names[j], f"{v:+.3f}") for i, j, v in where)
        blocks.append(Table(("layer", "position", "residual patched"), residual))
    return section("activation patching, clean → corrupted", *blocks)


def _lens(report: dict) -> Section:
    rows = []
    for layer in report["lens"]:
        best = ", ".join(f"{visible(t['token'])} {t['p']:.2f}" for t in layer["top"][:3])
        rows.append((str(layer["layer"]), best, str(layer["target_rank"])))
    target = visible(report["target"]["token"])
    return section(
        "logit lens: the residual after each layer, read as the last",
        Table(("layer", "top tokens (p)", f"rank of {target}"), tuple(rows)),
    )
