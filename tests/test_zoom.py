"""qkv.views.zoom against float64 NumPy: softmax of the scaled, masked scores and max-pooling
computed here by hand, on a lazy trace whose queries span two tiles and on an eager one."""

from __future__ import annotations

import math

import numpy as np
import pytest

import qkv
from qkv.lazy import lazy_attention
from qkv.views import zoom

H, G, L, D = 3, 1, 301, 8  # 301 queries: two tiles of steps.ROWS (256) and a part


def reference(q, k, *, tau=1.0, causal=True) -> np.ndarray:
    """(H, L, S) weights in float64: softmax(q·kᵀ / √d / τ), later keys masked."""
    q, k = q.astype(np.float64), k.astype(np.float64)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) / tau  # (H, L, S)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def maxpool(a: np.ndarray, fr: int, fk: int) -> np.ndarray:
    """(R, K) -> (⌈R/fr⌉, ⌈K/fk⌉) maxima, the edges padded with −∞."""
    R, K = a.shape
    pad = np.full((-(-R // fr) * fr, -(-K // fk) * fk), -np.inf)
    pad[:R, :K] = a
    return pad.reshape(pad.shape[0] // fr, fr, pad.shape[1] // fk, fk).max(axis=(1, 3))


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(7)
    q = rng.standard_normal((H, L, D)).astype(np.float32)
    k = rng.standard_normal((G, L, D)).astype(np.float32)
    v = rng.standard_normal((G, L, D)).astype(np.float32)
    q[1, 200] = 40 * k[0, 150]  # query 200 of head 1: one sharp weight on key 150
    _, trace = lazy_attention(q, k, v, causal=True)
    trace.tokens = [f"w{j % 23}" for j in range(L)]
    return q, k, trace, reference(np.repeat(q, 1, 0), np.repeat(k, H, 0))


def test_overview_is_max_pooled_and_keeps_a_sharp_weight(problem):
    _, _, trace, ref = problem
    got = zoom.overview(trace, 1, 40)
    f = math.ceil(L / 40)  # 8 positions a cell
    want = np.rint(255 * np.sqrt(maxpool(ref[1], f, f)))
    assert got.header["factor"] == [f, f] and got.data.shape == want.shape == (38, 38)
    assert np.abs(got.data.astype(int) - want).max() <= 1  # float32 against float64
    assert ref[1, 200, 150] > 0.99
    assert got.data[200 // f, 150 // f] >= 254  # one weight in 64 numbers, still dark
    assert "max-pooled" in got.header["legend"] and "8 queries × 8 keys" in got.header["legend"]


def test_overview_of_scores_says_its_range(problem):
    q, k, trace, _ = problem
    got = zoom.overview(trace, 0, 301, step="masked")
    s = (q[0].astype(np.float64) @ k[0].T.astype(np.float64)) / math.sqrt(D)
    lo, hi = s[np.tril_indices(L)].min(), s[np.tril_indices(L)].max()
    assert got.header["encoding"] == "uint8 linear"
    assert got.header["lo"] == pytest.approx(lo, rel=1e-5)
    assert got.header["hi"] == pytest.approx(hi, rel=1e-5)
    assert (got.data[np.triu_indices(L, 1)] == 0).all()  # masked: no value
    want = 1 + np.rint(254 * (s - lo) / (hi - lo))
    assert np.abs(got.data[np.tril_indices(L)] - want[np.tril_indices(L)]).max() <= 1


def test_window_exact_with_labels(problem):
    _, _, trace, ref = problem
    got = zoom.window(trace, 2, 250, 263, 7, 18)  # across the tile edge at 256
    assert got.header["exact"] and got.header["factor"] == 1
    assert got.data.dtype == np.float32 and got.data.shape == (13, 11)
    np.testing.assert_allclose(got.data, ref[2, 250:263, 7:18], rtol=2e-6, atol=1e-8)
    assert got.header["rows"][0] == "w20@250" and got.header["keys"] == [
        f"w{j % 23}@{j}" for j in range(7, 18)
    ]


def test_window_past_its_cell_budget_is_max_pooled(problem):
    _, _, trace, ref = problem
    got = zoom.window(trace, 1, 3, 290, 10, 300, max_cells=1000)
    f = got.header["factor"]
    assert f == 10  # 287 × 290 cells need 10 × 10 blocks to fit in 1,000 (9 gives 32 × 33)
    assert math.ceil(287 / 9) * math.ceil(290 / 9) > 1000
    assert not got.header["exact"] and "rows" not in got.header
    np.testing.assert_allclose(got.data, maxpool(ref[1, 3:290, 10:300], f, f), rtol=2e-6)


def test_row_strip_and_top_keys(problem):
    _, _, trace, ref = problem
    got = zoom.row(trace, 1, 200, width=50, k=3)
    f = math.ceil(L / 50)
    np.testing.assert_allclose(got.data, maxpool(ref[1, 200][None], 1, f)[0], rtol=2e-6, atol=1e-9)
    order = np.argsort(-ref[1, 200])[:3]
    assert [t["index"] for t in got.header["top"]] == order.tolist()
    assert got.header["top"][0] == {
        "index": 150,
        "token": "w12@150",
        "weight": pytest.approx(ref[1, 200, 150], rel=1e-6),
    }
    p = ref[1, 200][ref[1, 200] > 0]
    assert got.header["entropy"] == pytest.approx(-(p * np.log(p)).sum(), abs=1e-5)
    assert got.header["token"] == "w16@200" and got.header["sum"] == pytest.approx(1, abs=1e-6)


def test_search_names_positions():
    tokens = [" The", " cat", " sat", " on", " the", " mat", "."]
    assert zoom.search(tokens, "the") == {
        "query": "the",
        "hits": [{"index": 0, "token": "␣The"}, {"index": 4, "token": "␣the"}],
        "count": 2,
    }
    assert zoom.search(tokens, "␣mat")["hits"] == [{"index": 5, "token": "␣mat"}]
    assert zoom.search(tokens, "at", limit=1) == {
        "query": "at",
        "hits": [{"index": 1, "token": "␣cat"}],
        "count": 3,
    }
    assert zoom.search(tokens, "dog")["count"] == 0
    with pytest.raises(ValueError, match="non-space"):
        zoom.search(tokens, "  ")


def test_thumbnails_pool_every_head_of_every_layer(problem):
    q, k, trace, ref = problem
    _, other = lazy_attention(q, k, k, causal=True)
    got = zoom.thumbnails({3: trace, 7: other}, 32)
    f = math.ceil(L / 32)
    assert got.data.shape == (2, H, 31, 31) and got.header["layers"] == [3, 7]
    want = np.rint(255 * np.sqrt(np.stack([maxpool(ref[h], f, f) for h in range(H)])))
    assert np.abs(got.data[0].astype(int) - want).max() <= 1
    assert np.abs(got.data[1].astype(int) - want).max() <= 1  # same q, k: same weights


def test_temperature_keeps_a_lazy_trace_lazy(problem):
    q, k, trace, _ = problem
    hot = zoom.at_temperature(trace, 2.5)
    assert type(hot) is type(trace) and hot.settings["temperature"] == 2.5
    want = reference(q, np.repeat(k, H, 0), tau=2.5)
    got = zoom.window(hot, 0, 100, 120, 0, 120)
    np.testing.assert_allclose(got.data, want[0, 100:120, :120], rtol=2e-6, atol=1e-8)
    assert zoom.at_temperature(trace, 1.0) is trace


def test_an_eager_trace_gives_the_same_views():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 13, 5)) for _ in range(3))
    _, trace = qkv.attention(q, k, v, causal=True, return_trace=True)
    ref = reference(q, k)
    np.testing.assert_allclose(zoom.window(trace, 1, 0, 13, 0, 13).data, ref[1], rtol=1e-6)
    got = zoom.overview(trace, 0, 5)  # 3 × 3 blocks
    assert np.abs(got.data.astype(int) - np.rint(255 * np.sqrt(maxpool(ref[0], 3, 3)))).max() <= 1
    hot = zoom.at_temperature(trace, 0.5)
    np.testing.assert_allclose(zoom.window(hot, 0, 0, 13, 0, 13).data, reference(q, k, tau=0.5)[0],
                               rtol=1e-6)  # fmt: skip


def test_payload_bytes_round_trip_and_refuse_damage(problem):
    _, _, trace, _ = problem
    p = zoom.window(trace, 0, 0, 9, 0, 9)
    raw = p.to_bytes()
    n = int.from_bytes(raw[4:8], "little")
    assert raw[:4] == b"QKVZ" and (8 + n) % 8 == 0
    back = zoom.unpack(raw)
    assert back.header == p.header and np.array_equal(back.data, p.data)
    header, buffers = p.buffers()
    assert header == p.header and buffers == [p.data.tobytes()]
    with pytest.raises(ValueError, match="needs 324 bytes, got 323"):
        zoom.unpack(raw[:-1])
    with pytest.raises(ValueError, match="starts with"):
        zoom.unpack(b"JUNK" + raw[4:])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: zoom.window(t, 0, 10, 10, 0, 5), r"r1 must be an integer in \[11, 301\]"),
        (lambda t: zoom.window(t, 0, 0, 5, 0, 302), r"c1 must be an integer in \[1, 301\]"),
        (lambda t: zoom.row(t, 0, 301), r"q must be an integer in \[0, 300\]"),
        (lambda t: zoom.overview(t, 0, 0), r"size must be an integer in \[1, 1024\]"),
        (lambda t: zoom.overview(t, 0, step="out"), "step must be one of"),
        (lambda t: zoom.overview(t, None), "pass head="),
        (lambda t: zoom.thumbnails([t], 65), r"size must be an integer in \[1, 64\]"),
    ],
)
def test_bad_requests_name_what_was_expected(problem, call, message):
    with pytest.raises((ValueError, IndexError), match=message):
        call(problem[2])


def test_the_grid_of_a_run_is_pooled_to_64_and_exact_below(problem):
    import base64

    from qkv.views import grid

    q, k, trace, ref = problem
    got = grid.grid_of({0: trace})
    f = math.ceil(L / 64)  # 5 positions a cell: 61 × 61
    data = np.frombuffer(base64.b64decode(got["data"]), np.uint8).reshape(got["shape"])
    assert got["shape"] == [1, H, 61, 61]
    want = np.rint(255 * np.stack([maxpool(ref[h], f, f) for h in range(H)]))
    assert np.abs(data[0].astype(int) - want).max() <= 1
    rng = np.random.default_rng(5)
    small = [rng.standard_normal((2, 9, 4)).astype(np.float32) for _ in range(3)]
    _, short = lazy_attention(*small, causal=True)  # 9 tokens: every weight, not pooled
    data = np.frombuffer(base64.b64decode(grid.grid_of({0: short})["data"]), np.uint8)
    assert np.abs(data.reshape(2, 9, 9) - np.rint(255 * reference(small[0], small[1]))).max() <= 1
