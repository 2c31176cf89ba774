"""The static notebook display of traces, scenes and model runs: a legend, shapes in words,
the weights in labelled cells, the selected row; no scripts and nothing fetched."""

from __future__ import annotations

import html
import re

import numpy as np

import qkv


def cells(page: str) -> list[str]:
    return re.findall(r"<td title='weights\[([^']*)\] = ([0-9.]+)'", page)


def test_trace_html_has_a_legend_shapes_in_words_and_every_weight():
    tr = qkv.presets.load("cat-sat").trace()
    page = tr._repr_html_()
    assert "<script" not in page and "http" not in page
    assert "class='qkv-legend'" in page and "weight&nbsp;0" in page
    assert "6 queries × 6 keys, d_k = 3, d_v = 3" in page
    got = cells(page)
    assert len(got) == 36  # every cell labelled with its query → key and its value
    w = tr.weights
    assert got[2 * 6 + 3] == (f"{tr.tokens[2]} → {tr.tokens[3]}", f"{w[2, 3]:.4f}")
    assert "weights of the selected query ‘mat’" in page  # the last query by default


def test_masked_cells_are_drawn_as_masked_and_explained():
    sc = qkv.presets.load("two-heads")
    page = sc.trace(causal=True)._repr_html_()
    assert "2 heads × 6 queries × 6 keys" in page
    assert "× masked (weight exactly 0)" in page
    assert page.count("· masked'") == 2 * 15  # 15 hidden cells in each head's 6 × 6 triangle
    assert "weights, head 1" in page


def test_scene_html_selects_the_scenes_token():
    sc = qkv.presets.load("bank")
    page = sc._repr_html_()
    assert "scene bank" in page and html.escape(sc.lesson) in page
    assert "weights of the selected query ‘bank’" in page
    w = sc.trace().weights[4]
    top = int(np.argmax(w))
    assert f"‘bank’ attends most to ‘{sc.tokens[top]}’ (weight {w[top]:.3f})" in page


def test_large_traces_are_summarised(rng):
    q = rng.normal(size=(60, 4))
    _, tr = qkv.attention(q, q, q, return_trace=True)
    page = tr._repr_html_()
    assert "60 queries × 60 keys" in page and "too large to draw" in page
    assert "<td title='weights[" not in page


def test_model_run_html_has_the_grid_and_one_head(minilm):
    run = minilm.trace("The bank raised its rates")
    page = run._repr_html_()
    L = len(run.tokens)
    assert f"{L} tokens, 6 layers × 12 heads" in page
    assert page.count("<img alt='layer ") == 72 and "data:image/png;base64," in page
    assert "layer 0, head 0 in full" in page and len(cells(page)) == L * L
    assert "<script" not in page
