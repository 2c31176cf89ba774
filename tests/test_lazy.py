"""Lazy traces: every step of every head, read lazily (whole, per head, by rows), equals the
eager trace bit for bit on random problems with GQA, padding, causal alignments, sliding
windows, soft-capping, sinks, biases and half precision; the readers against float64 by hand;
the size budget; the bytes a 2,048-token trace holds; masks.infer recovers the rules."""

from __future__ import annotations

import numpy as np
import pytest

from qkv import MultiHeadAttention, attention, masks
from qkv.lazy import LazyTrace, lazy_attention
from qkv.steps import ROWS
from qkv.tiles import SHARED, Shelf, Source, TileCache


def same(a, b) -> bool:
    """Bit for bit: dtype, shape and values (NaN equal to NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    nan = a.dtype.kind == "f"
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=nan)


def random_problem(seed: int):
    """q, k, v and keyword options of a random attention problem; L crosses a tile edge."""
    rng = np.random.default_rng(seed)
    B, G = int(rng.integers(1, 3)), int(rng.choice([1, 2, 3]))
    H = G * int(rng.integers(1, 3))
    L = int(rng.choice([1, 7, ROWS - 1, ROWS + 1, 2 * ROWS + 3]))
    S = L + int(rng.choice([0, 0, 5]))
    d = int(rng.choice([3, 8]))
    dtype = [np.float16, np.float32, np.float64][int(rng.integers(3))]
    q = rng.normal(size=(B, H, L, d)).astype(dtype)
    k = rng.normal(size=(B, G, S, d)).astype(dtype)
    v = rng.normal(size=(B, G, S, d + 1)).astype(dtype)
    causal = [True, "top-left", False][int(rng.integers(3))]
    options = {"causal": causal, "temperature": 0.5 + rng.random()}
    if rng.random() < 0.5:  # padding: sequence b has lengths[b] real keys
        lengths = rng.integers(1, S + 1, size=B)
        options["mask"] = masks.padding(lengths, S)[:, None]  # (B, 1, 1, S)
    if rng.random() < 0.5:
        options["softcap"] = float(1 + 4 * rng.random())
    if rng.random() < 0.5:
        options["sinks"] = rng.normal(size=H)
    if rng.random() < 0.3:
        options["bias"] = rng.normal(size=(1, H, L, S))
    return q, k, v, options


@pytest.mark.parametrize("seed", range(12))
def test_every_step_of_every_head_equals_the_eager_trace_bit_for_bit(seed):
    q, k, v, options = random_problem(seed)
    _, eager = attention(q, k, v, return_trace=True, **options)
    z, lazy = lazy_attention(q, k, v, **options)
    np.testing.assert_allclose(z, eager["z"], rtol=0, atol=1e-2)  # the kernel's z, not the trace's
    assert [n for n in eager.names if n != "out"] == lazy.names
    for name in lazy.names:
        assert same(lazy[name], eager[name]), name
    masks_ = [m if m is None else np.broadcast_to(m, eager["weights"].shape)
              for m in (lazy.settings["mask"], eager.settings["mask"])]  # fmt: skip
    assert masks_[0] is masks_[1] is None or same(*masks_)
    for key in ("scale", "temperature", "causal", "L", "S", "n_heads", "n_kv_heads", "sinks"):
        assert lazy.settings.get(key) == eager.settings.get(key), key


@pytest.mark.parametrize("seed", range(12, 18))
def test_one_sequence_and_one_head_read_lazily_equal_the_eager_steps(seed):
    q, k, v, options = random_problem(seed)
    q, k, v = q[:1], k[:1], v[:1]
    options.pop("mask", None)
    if "bias" in options:
        options["bias"] = options["bias"][0]  # (H, L, S)
    _, eager = attention(q[0], k[0], v[0], return_trace=True, **options)
    _, lazy = lazy_attention(q[0], k[0], v[0], **options)
    H, L = q.shape[1], q.shape[2]
    for h in range(H):
        want, got = eager.head(h), lazy.head(h)
        assert got.names == want.names
        for name in want.names:
            assert same(got[name], want[name]), (h, name)
        rows = [L - 1, 0, L // 2]
        for name in ("scores", "masked", "weights", "z"):
            assert same(lazy.rows(rows, head=h, step=name), want[name][rows]), name
        assert same(got.block(slice(0, L, 2), [0, -1]), want["weights"][::2][:, [0, -1]])
        assert same(lazy.contributions(L - 1, head=h), eager.contributions(L - 1, head=h))


def test_a_sliding_window_rule_equals_its_dense_mask():
    rng = np.random.default_rng(3)
    H, G, L, d, w = 4, 2, 2 * ROWS + 5, 8, 37
    q, k, v = (rng.normal(size=(n, L, d)).astype(np.float32) for n in (H, G, G))
    rule = masks.Rule(L, L, causal="bottom-right", window=w)
    dense = masks.causal(L) & (np.arange(L)[:, None] - np.arange(L)[None, :] < w)  # by hand
    assert same(rule.dense(), dense)
    lazy = LazyTrace(Source(q, k, v, rule, scale=d**-0.5, sinks=np.zeros(H)))
    _, eager = attention(q, k, v, mask=dense, sinks=np.zeros(H), return_trace=True)
    for name in ("scores", "masked", "weights", "sink", "z"):
        assert same(lazy[name], eager[name]), name


def test_readers_match_float64_by_hand():
    rng = np.random.default_rng(5)
    H, L, d = 3, ROWS + 40, 4
    q, k, v = (rng.normal(size=(H, L, d)) * 2 for _ in range(3))
    _, lazy = lazy_attention(q, k, v, causal=True)
    scores = np.einsum("hld,hsd->hls", q, k) / 2.0  # float64 by hand, scale 1/√4
    scores = np.where(masks.causal(L), scores, -np.inf)
    W = np.exp(scores - scores.max(-1, keepdims=True))
    W /= W.sum(-1, keepdims=True)  # (H, L, L)
    for h in range(H):
        top = lazy.top_keys(4, head=h)
        for i in (0, 1, 2, L - 1):
            order = sorted(range(L), key=lambda j, i=i: (-W[h, i, j], j))[:4]
            assert top.keys[i].tolist() == order
            np.testing.assert_allclose(top.weights[i], W[h, i, order], atol=1e-12)
        stats = lazy.head_stats(h)
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = -np.nansum(np.where(W[h] > 0, W[h] * np.log(W[h]), 0.0), axis=-1)
        np.testing.assert_allclose(stats["entropy"], ent, atol=1e-9)
        np.testing.assert_allclose(stats["max"], W[h].max(-1), atol=1e-12)
        np.testing.assert_allclose(stats["first"], W[h, :, 0], atol=1e-12)
        np.testing.assert_allclose(stats["previous"][1:], W[h, np.arange(1, L), np.arange(L - 1)])
        assert np.isnan(stats["previous"][0]) and np.isnan(stats["next"][-1])
        np.testing.assert_allclose(stats["next"][:-1], 0.0)  # causal: the next token is hidden
        pooled = lazy.pooled(64, head=h)  # factor ⌈296/64⌉ = 5: 60 × 60 cells
        assert pooled.values.shape == (60, 60) and pooled.rows[-1] == L
        np.testing.assert_allclose(pooled.values[7, 3], W[h, 35:40, 15:20].max(), atol=1e-12)
        np.testing.assert_allclose(pooled.values[-1, -1], W[h, 295:, 295:].max(), atol=1e-12)
    assert lazy.head_stats()["entropy"].shape == (H, L)


def test_a_whole_step_past_the_budget_is_refused_naming_its_size_and_smaller_readers():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 300, 4)).astype(np.float32) for _ in range(3))
    _, lazy = lazy_attention(q, k, v)
    lazy.budget = 500_000  # bytes; the weights take 2 × 300 × 300 × 4 = 720,000
    with pytest.raises(
        ValueError, match=r"trace\['weights'\] would hold 1 MB .*head\(h\).*top_keys"
    ):
        lazy["weights"]
    assert lazy.head(1)["weights"].shape == (300, 300)  # 360,000 bytes: within the budget
    with pytest.raises(ValueError, match="pass head="):
        lazy.rows(0)


def test_the_tile_cache_keeps_the_step_read_alone_within_its_bytes():
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(4, 3 * ROWS, 8)).astype(np.float32) for _ in range(3))
    _, lazy = lazy_attention(q, k, v, causal=True)
    cache = lazy.source.cache = TileCache(5 * ROWS * 3 * ROWS * 4)  # five (ROWS, S) float32
    for h in range(4):  # 4 heads × 3 tiles, read in order: the last five are kept, weights alone
        lazy.rows(range(3 * ROWS), head=h)
    assert cache.bytes == cache.max_bytes
    last = [((), h, t, "weights") for h, t in [(2, 1), (2, 2), (3, 0), (3, 1), (3, 2)]]
    assert list(cache.tiles) == last
    assert all(list(tile) == ["weights"] for tile in cache.tiles.values())
    lazy.head(0)["scores"]  # a whole step is copied into its answer, its tiles not kept
    assert list(cache.tiles) == last


def test_every_lazy_trace_shares_one_tile_budget_and_clears_only_its_own_tiles():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(2, ROWS, 8)).astype(np.float32) for _ in range(3))
    store = TileCache(10 * ROWS * ROWS * 4)
    traces = [lazy_attention(q, k, v)[1] for _ in range(3)]
    for tr in traces:
        tr.source.cache = Shelf(store)
    for tr in traces:
        tr.rows(range(ROWS), head=0)  # a reader of rows keeps its tiles
    assert 0 < store.bytes <= store.max_bytes  # three traces, one budget
    tokens = {key[0] for key in store.tiles}
    traces[0].source.cache.clear()
    assert {key[0] for key in store.tiles} == tokens - {traces[0].source.cache.token}
    np.testing.assert_array_equal(traces[0].head(0)["weights"], traces[1].head(0)["weights"])
    assert lazy_attention(q, k, v)[1].source.cache.store is SHARED  # the default


def test_a_2048_token_trace_holds_x_q_k_v_and_out_and_nothing_of_size_L_by_L():
    rng = np.random.default_rng(2)
    L, d_model, H, G, d_head = 2048, 96, 6, 2, 16
    mha = MultiHeadAttention(d_model, H, rng, d_head=d_head, n_kv_heads=G)
    for name, W in mha.parameters().items():
        setattr(mha, name, W.astype(np.float32))
    x = rng.normal(size=(L, d_model)).astype(np.float32)
    out, lazy = mha(x, causal=True, return_trace="lazy")
    # x (L, d_model), q (H, L, d_head), k and v (G, L, d_head), out (L, d_model), float32
    want = 4 * L * (d_model + H * d_head + 2 * G * d_head + d_model)
    assert lazy.nbytes == want == 4 * 2048 * 352
    assert same(out, lazy["out"]) and same(x, lazy["x"])
    assert lazy.source.rule.mask is None and lazy.source.rule.causal == "bottom-right"
    assert lazy.head(5)["weights"].shape == (L, L)  # computed when asked for


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("window", [None, 3])
def test_infer_finds_padding_causal_and_window(left, window):
    L, lengths = 9, [9, 5]
    pad = np.zeros((2, L), bool)
    for b, n in enumerate(lengths):
        pad[b, L - n :] = True if left else False
        pad[b, :n] = True if not left else pad[b, :n]
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    dense = pad[:, None, None, :] & (j <= i) & (True if window is None else i - j < window)
    rule = masks.infer(dense, L, L)
    assert rule.causal == "bottom-right" and rule.window == window
    assert rule.mask.shape == (2, 1, 1, L)  # the padding, as keys
    assert same(np.broadcast_to(rule.dense(), dense.shape), dense)
    seq = rule.take(1, np.flatnonzero(pad[1]))
    assert seq.mask is None and seq.L == 5 and same(seq.dense(), dense[1, 0][pad[1]][:, pad[1]])


def test_infer_keeps_a_mask_that_follows_no_rule_whole():
    rng = np.random.default_rng(4)
    dense = rng.random((1, 1, 6, 6)) < 0.6
    dense[..., 0] = True
    rule = masks.infer(dense, 6, 6)
    assert rule.causal is None and same(rule.dense(), dense)
