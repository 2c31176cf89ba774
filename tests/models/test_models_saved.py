"""A run saved to disk and loaded back (``run.save``, ``qkv.load``) computes the same steps bit
for bit; a truncated, oversized, foreign or inconsistent file is refused with a clear error
before any array is allocated."""

from __future__ import annotations

import json
import struct
import tracemalloc

import numpy as np
import pytest

import qkv
from qkv import MultiHeadAttention, masks
from qkv.lazy import LazyTrace
from qkv.models import ModelTrace
from qkv.tiles import Source

L = 300


@pytest.fixture
def run():
    """A two-layer run: a causal MultiHeadAttention layer with GQA and sinks, and a padded,
    windowed, soft-capped layer with a bias; 300 tokens."""
    rng = np.random.default_rng(0)
    mha = MultiHeadAttention(24, 4, rng, n_kv_heads=2)
    x = rng.normal(size=(L, 24))
    _, first = mha(x, causal=True, sinks=np.array([0.5, -1.0, 0.0, 2.0]), return_trace="lazy")
    q, k, v = (rng.normal(size=(n, L, 8)).astype(np.float32) for n in (2, 1, 1))
    keys = np.ones((1, 1, L), bool)
    keys[..., :3] = False
    rule = masks.Rule(L, L, mask=keys, causal="bottom-right", window=17)
    bias = rng.normal(size=(2, 1, L)).astype(np.float32)
    second = LazyTrace(Source(q, k, v, rule, scale=0.3, softcap=5.0, bias=bias))
    tokens = [f"t{i}" for i in range(L)]
    return ModelTrace(
        "toy", tokens, list(range(L)), {0: first, 3: second}, rng.normal(size=(L, 24))
    )


def test_a_saved_run_loads_back_with_every_step_bit_for_bit(run, tmp_path):
    path = tmp_path / "run.qkvtrace"
    size = run.save(path)
    assert size == path.stat().st_size
    back = qkv.load(path)
    assert (back.model, back.tokens, back.ids) == (run.model, run.tokens, run.ids)
    np.testing.assert_array_equal(back.hidden, run.hidden)
    for i, want in run.layers.items():
        got = back.layer(i)
        assert got.names == want.names
        for name in want.names:
            a, b = got[name], want[name]
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), (i, name)
        assert {k: v for k, v in got.settings.items() if k != "mask"} == {
            k: v for k, v in want.settings.items() if k != "mask"
        }
        assert np.array_equal(got.settings["mask"], want.settings["mask"])
    assert back.nbytes == run.nbytes


def _rewrite(path, change):
    """The file at ``path`` with its header JSON passed through ``change``."""
    raw = path.read_bytes()
    magic, version, n = struct.unpack("<8sIQ", raw[:20])
    header = change(json.loads(raw[20 : 20 + n]))
    text = json.dumps(header).encode()
    start, new_start = -(-(20 + n) // 64) * 64, -(-(20 + len(text)) // 64) * 64
    pad = b"\0" * (new_start - 20 - len(text))
    path.write_bytes(struct.pack("<8sIQ", magic, version, len(text)) + text + pad + raw[start:])


def _refused(path, match):
    """Loading ``path`` fails with ``match`` and allocates no array on the way."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=match):
            qkv.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # parsing the header takes ~40 kB; the first array the file holds (hidden) takes 57.6 kB
    assert peak < 64_000, peak


def test_a_truncated_file_is_refused_before_anything_is_allocated(run, tmp_path):
    path = tmp_path / "run.qkvtrace"
    run.save(path)
    whole = path.read_bytes()
    for cut in (10, 100, len(whole) // 2, len(whole) - 1):
        path.write_bytes(whole[:cut])
        _refused(path, r"truncated|not a qkv trace file")


def test_an_oversized_claim_and_trailing_bytes_are_refused(run, tmp_path):
    path = tmp_path / "run.qkvtrace"
    run.save(path)

    def huge(h):
        h["layers"][0]["arrays"]["q"]["shape"] = [4, 10**9, 10**9]
        return h

    _rewrite(path, huge)
    _refused(
        path,
        r"layer 0 q ends at byte 32,000,000,000,000,\S+ of the data, which has [\d,]+: the file is truncated",
    )
    run.save(path)
    path.write_bytes(path.read_bytes() + b"\0" * 100)
    _refused(path, "100 bytes follow the last array")


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda h: {**h, "format": "other"}, "does not describe a qkv trace"),
        (lambda h: {**h, "ids": h["ids"][:-1]}, "ids: expected 300 integers"),
        (lambda h: _set(h, "q", "dtype", "<i8"), r"layer 0 q: expected a dtype in"),
        (lambda h: _set(h, "q", "shape", [4, 299, 6]), r"layer 0: q \(4, 299, 6\) and k"),
        (lambda h: _set(h, "k", "offset", 0), "overlap"),
        (lambda h: _set(h, "sinks", "shape", [3]), r"sinks has shape \(3,\)"),
    ],
)
def test_an_inconsistent_header_is_refused_by_name(run, tmp_path, change, match):
    path = tmp_path / "run.qkvtrace"
    run.save(path)
    _rewrite(path, change)
    _refused(path, match)


def _set(header, array, key, value):
    header["layers"][0]["arrays"][array][key] = value
    return header


def test_a_foreign_file_or_another_version_is_refused(tmp_path, run):
    path = tmp_path / "x.qkvtrace"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    _refused(path, r"not a qkv trace file")
    run.save(path)
    raw = path.read_bytes()
    path.write_bytes(raw[:8] + struct.pack("<I", 2) + raw[12:])
    _refused(path, "trace file version 2; this qkv reads 1")
