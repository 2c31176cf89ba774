"""The file of a long text (``notebook/export_long.py``): read back here, each head's overview is
its weights max-pooled and shaded by hand, each query's top keys are the heaviest by a plain
argsort, the file says in words what it leaves out, and a file past the size bound is refused.
At 4,096 SmolLM2 tokens (slow) the file stays within 20 MB."""

from __future__ import annotations

import base64
import gzip
import json
import re

import numpy as np
import pytest

from qkv.notebook import export_long
from qkv.notebook.export import to_html

TEXT = " ".join(["the bank raised its rates and the river bank flooded after the rain"] * 22)


def read_back(html: str) -> tuple[dict, bytes]:
    """The file's JSON and its arrays, as its own script reads them."""

    def unpacked(name: str) -> bytes:
        found = re.search(rf'id="{name}"[^>]*>([^<]*)</script>', html)
        assert found, name
        return gzip.decompress(base64.b64decode(found.group(1)))

    return json.loads(unpacked("qkv-data")), unpacked("qkv-bytes")


def array(blob: bytes, ref: dict) -> np.ndarray:
    a = np.frombuffer(blob[ref["at"] : ref["at"] + ref["n"]], dtype=np.dtype(ref["dtype"]))
    return a.reshape(ref["shape"])


def pooled_by_hand(w: np.ndarray, size: int) -> np.ndarray:
    """Max over blocks of ⌈L/size⌉ × ⌈S/size⌉ (padding with 0, below every weight)."""
    f = -(-max(w.shape) // size)
    R, K = -(-w.shape[0] // f), -(-w.shape[1] // f)
    pad = np.zeros((R * f, K * f))
    pad[: w.shape[0], : w.shape[1]] = w
    return pad.reshape(R, f, K, f).max(axis=(1, 3))


@pytest.fixture(scope="module")
def run(minilm):
    r = minilm.trace(TEXT, layers=[2, 5])
    assert len(r.tokens) > export_long.OVERVIEW  # so the overview pools
    return r


def test_each_head_is_its_pooled_weights_and_each_query_its_top_keys(run):
    data, blob = read_back(to_html(run, select=7, head=3, layer=5))
    assert data["start"] == {"select": 7, "temperature": 1.0, "head": 3, "layer": 5}
    assert sorted(data["long"]["heads"]) == sorted(
        f"{lay}|{h}" for lay in (2, 5) for h in range(12)
    )
    for lay, h in [(2, 0), (5, 11)]:
        found = data["long"]["heads"][f"{lay}|{h}"]
        w = np.asarray(run.layer(lay)["weights"][h], dtype=np.float64)  # (L, L)
        shade = np.rint(255 * np.sqrt(pooled_by_hand(w, export_long.OVERVIEW)))
        ov = array(blob, found["overview"]["data"])
        assert found["overview"]["header"]["shape"] == list(ov.shape) == list(shade.shape)
        np.testing.assert_array_equal(ov, shade)
        keys = array(blob, found["keys"])  # (L, TOP)
        lo, hi = array(blob, found["weights"]).astype(np.uint16)  # float16 as two byte planes
        weights = (lo | hi << 8).view(np.float16).astype(np.float64)
        assert keys.shape == (len(w), export_long.TOP)
        mine = np.take_along_axis(w, keys.astype(int), axis=1)
        best = -np.sort(-w, axis=1)[:, : export_long.TOP]
        np.testing.assert_array_equal(mine, best)  # the heaviest keys (ties: either)
        np.testing.assert_allclose(weights, best, rtol=1e-3, atol=1e-7)  # float16


def test_the_file_says_what_it_leaves_out(run):
    data, _ = read_back(to_html(run))
    words = data["info"]["lesson"]
    assert "2 layers × 12 heads at τ = 1" in words
    assert f"max-pooled to at most {export_long.OVERVIEW} × {export_long.OVERVIEW}" in words
    assert f"{export_long.TOP} heaviest keys" in words
    assert "leaves out" in words and "every other τ" in words
    assert data["info"]["tau"]["values"] == [1.0]


def test_a_file_past_the_bound_is_refused_and_one_tau_only(run, monkeypatch, tmp_path):
    monkeypatch.setattr(export_long, "MAX_FILE_BYTES", 100_000)
    path = tmp_path / "big.html"
    with pytest.raises(ValueError, match=r"would be \d+\.\d MB, more than 0\.1 MB: .*--layer"):
        to_html(run, path)
    assert not path.exists()
    with pytest.raises(ValueError, match=r"one τ .* got 2: \[0\.5, 1\.0\]"):
        to_html(run, temperatures=[0.5, 1.0])


def prose(model, n: int) -> str:
    """n tokens of this project's own prose (README and docs): real text, not a repetition,
    so the file compresses as a user's would."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = " ".join(p.read_text() for p in [root / "README.md", *sorted(root.glob("docs/**/*.md"))])
    count = lambda t: len(model.encode(t, limit=100_000)[0])  # noqa: E731
    lo, hi = 1, len(text)
    while hi - lo > 1:  # the longest prefix of at most n tokens
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(text[:mid]) <= n else (lo, mid)
    return text[:lo]


@pytest.mark.slow
def test_4096_smollm2_tokens_fit_20_mb(smollm2):
    from qkv.models.result import ModelTrace

    text = prose(smollm2, 4096)
    run = smollm2.trace(text, layers=[0, 29])
    assert len(run.tokens) == 4096

    def file_of(layers) -> int:
        part = ModelTrace(run.model, run.tokens, run.ids, {i: run.layers[i] for i in layers},
                          run.hidden)  # fmt: skip
        return len(to_html(part).encode())

    one, two = file_of([0]), file_of([0, 29])
    # 30 layers: the first one's file and 29 more like the last one
    assert one + 29 * (two - one) <= export_long.MAX_FILE_BYTES, (one, two)
