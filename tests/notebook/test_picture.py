"""The still picture of a view (``views.picture``): a PNG that Pillow decodes, whose cells are
darker where the weights computed here are larger, with the selected query marked and its row
drawn below; pooled for a long text so one sharp weight stays visible."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

import qkv
from qkv.views import picture
from qkv.views.viewers import view_of

Image = pytest.importorskip("PIL.Image", reason="Pillow decodes the PNG independently")


def decoded(png: bytes) -> np.ndarray:
    img = Image.open(io.BytesIO(png))
    img.load()
    assert img.format == "PNG" and img.mode == "RGB"
    return np.asarray(img)  # (height, width, 3)


def darkness(rgb: np.ndarray) -> np.ndarray:
    return 765 - rgb.astype(int).sum(axis=-1)


def bank_weights(temperature=1.0) -> np.ndarray:
    sc = qkv.presets.load("bank")
    q, k = sc.x @ sc.W_Q, sc.x @ sc.W_K  # (8, d)
    s = q @ k.T / np.sqrt(q.shape[1]) / temperature
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)  # (8, 8), float64


def test_the_picture_of_a_scene_is_its_weights_cell_by_cell():
    pic = view_of(qkv.presets.load("bank")).picture(select=4, temperature=0.5)
    img = decoded(pic.png)
    assert img.shape == (pic.height, pic.width, 3)
    w = bank_weights(0.5)
    c = pic.cell
    assert pic.cells == (8, 8) and c >= 8
    # the centre pixel of each cell: darker exactly where the weight is larger
    centres = img[c // 2 : 8 * c : c, picture.MARGIN + c // 2 :: c][:8, :8]  # (8, 8, 3)
    d = darkness(centres)
    assert np.unravel_index(d.argmax(), d.shape) == np.unravel_index(w.argmax(), w.shape)
    order = np.argsort(w, axis=None, kind="stable")
    assert np.all(np.diff(d.ravel()[order]) >= 0)  # never lighter for a larger weight
    # the strip below the heatmap is query 4's row, darkest at its heaviest key
    strip = img[-2, picture.MARGIN + c // 2 :: c][:8]
    assert darkness(strip).argmax() == w[4].argmax() == 6
    # the mark at the left sits on query 4's row, and nowhere else beside the heatmap
    marked = np.all(img[: 8 * c, 0] == picture.MARK, axis=-1)
    assert np.flatnonzero(marked).tolist() == list(range(4 * c, 5 * c))


def test_a_long_trace_is_max_pooled_so_one_sharp_weight_shows(rng):
    L, d = 1000, 8
    q = rng.normal(size=(L, d)) * 0.01
    k = rng.normal(size=(L, d)) * 0.01
    q[700] = k[123] = 40.0  # query 700 looks at key 123 alone
    _, tr = qkv.attention(q, k, k, return_trace=True)
    pic = picture.picture(tr, 700)
    f = -(-L // picture.CELLS)  # ceil: queries (and keys) a cell
    R = -(-L // f)
    assert pic.cells == (R, R) and pic.rows.tolist() == [*range(0, L, f), L]
    img = decoded(pic.png)
    heat = img[: R * pic.cell, picture.MARGIN :]
    d = darkness(heat)
    # the darkest pixel is in the cell holding (700, 123); a plain average would have hidden it
    r, c = np.unravel_index(d.argmax(), d.shape)
    assert (r // pic.cell, c // pic.cell) == (700 // f, 123 // f)
    assert "max-pooled to" in pic.words()


def test_the_ramp_is_the_page_s():
    dom = (Path(qkv.__file__).parent / "web" / "static" / "dom.js").read_text()
    stops = re.search(r"const RAMP = (\[\[.*?\]\]);", dom)
    assert stops, "dom.js names its ramp RAMP"
    assert [list(s) for s in picture.RAMP] == eval(stops.group(1))  # a list of lists of ints
    # rampColor(0.5): halfway between the 2nd and 3rd stops, rounded as Math.round does
    a, b = np.array(picture.RAMP[1]), np.array(picture.RAMP[2])
    np.testing.assert_array_equal(picture.ramp(0.5), np.floor((a + b) / 2 + 0.5))


def test_png_refuses_what_is_not_an_image():
    with pytest.raises(ValueError, match=r"\(height, width, 3\) image, got \(4, 4\)"):
        picture.png(np.zeros((4, 4), np.uint8))
