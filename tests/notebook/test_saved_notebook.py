"""A notebook whose cell ends in ``qkv.show(...)``, executed by nbclient in a real kernel: the
saved output holds the widget and, beside it, the static picture of its view (a PNG that
Pillow decodes, darkest where the weights computed here are largest) and the view in words,
so nbconvert's HTML, GitHub or a notebook opened without its kernel show it."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

import numpy as np
import pytest

import qkv

nbformat = pytest.importorskip("nbformat", reason="the dev extra is not installed")
nbclient = pytest.importorskip("nbclient", reason="the dev extra is not installed")
pytest.importorskip("ipykernel", reason="the dev extra is not installed")
pytest.importorskip("anywidget", reason="the notebook extra is not installed")
Image = pytest.importorskip("PIL.Image")

SRC = str(Path(qkv.__file__).resolve().parents[1])  # the qkv the kernel must import

CELL = """import qkv
qkv.show(qkv.presets.load("bank"), select="bank", temperature=0.5)"""


def run(tmp_path, source: str):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    client = nbclient.NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.km = client.create_kernel_manager()
    client.start_new_kernel(env=env)  # the kernel imports this checkout's qkv
    client.execute(reset_kc=False)
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    return nbformat.read(path, as_version=4)  # what a reader of the file gets


def test_the_saved_output_holds_the_picture_of_the_view(tmp_path):
    nb = run(tmp_path, CELL)
    (out,) = nb.cells[0].outputs
    assert out.output_type == "execute_result"
    assert "application/vnd.jupyter.widget-view+json" in out.data
    words = out.data["text/plain"]
    assert "bank" in words and "τ = 0.5" in words and "query 4 (bank)" in words
    img = Image.open(io.BytesIO(base64.b64decode(out.data["image/png"])))
    img.load()
    assert img.format == "PNG"
    meta = out.metadata["image/png"]
    assert img.size == (meta["width"], meta["height"])
    rgb = np.asarray(img.convert("RGB")).astype(int)
    # 8 × 8 square cells at the right of an 8-pixel margin, then the selected row below
    width, height = img.size
    cell = (width - 8) // 8
    assert width == 8 + 8 * cell and height > 8 * cell
    sc = qkv.presets.load("bank")
    q, k = sc.x @ sc.W_Q, sc.x @ sc.W_K
    s = q @ k.T / np.sqrt(q.shape[1]) / 0.5  # τ = 0.5
    w = np.exp(s - s.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    centres = rgb[cell // 2 : 8 * cell : cell, 8 + cell // 2 :: cell][:8, :8]
    dark = 765 - centres.sum(axis=-1)
    assert np.unravel_index(dark.argmax(), dark.shape) == np.unravel_index(w.argmax(), w.shape)
    # the widget's state was saved too: the picture is in it, for a view opened without a kernel
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    model = state[out.data["application/vnd.jupyter.widget-view+json"]["model_id"]]
    saved = [b for b in model.get("buffers", []) if b["path"] == ["picture"]]
    assert saved and base64.b64decode(saved[0]["data"]) == base64.b64decode(out.data["image/png"])


def test_nbconvert_html_shows_the_picture(tmp_path):
    nbconvert = pytest.importorskip("nbconvert", reason="nbconvert is not installed")
    nb = run(tmp_path, CELL)
    png = nb.cells[0].outputs[0].data["image/png"]
    del nb.metadata["widgets"]  # as a notebook saved without its widgets' state
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    assert f'src="data:image/png;base64,{png}"' in html
