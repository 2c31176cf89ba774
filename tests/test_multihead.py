import numpy as np
import pytest

import qkv
from qkv import steps


def test_shapes_and_init_scale():
    mha = qkv.MultiHeadAttention(64, 4, seed=0)
    assert mha.W_Q.shape == (4, 64, 16) and mha.W_K.shape == (4, 64, 16)
    assert mha.W_O.shape == (4, 16, 64) and mha.b_O.shape == (64,)
    assert abs(mha.W_Q.std() - 0.02) < 0.002  # N(0, 0.02²)
    # the tutorials' Mini-GPT count: 12,288 Q/K/V + 4,096 W_O
    sizes = {n: a.size for n, a in mha.parameters().items()}
    assert sizes["W_Q"] + sizes["W_K"] + sizes["W_V"] == 12288 and sizes["W_O"] == 4096


def test_same_seed_same_weights_different_seed_different():
    a, b, c = (qkv.MultiHeadAttention(8, 2, seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.W_Q, b.W_Q) and not np.array_equal(a.W_Q, c.W_Q)


def test_sum_over_heads_equals_concat_times_W_O(rng):
    mha = qkv.MultiHeadAttention(12, 3, seed=0)
    mha.b_O = rng.normal(size=12)
    x = rng.normal(size=(2, 5, 12))
    out, tr = mha(x, return_trace=True)
    concat = steps.merge_heads(tr.z)  # (2, 5, 3·4)
    W_O = mha.W_O.reshape(12, 12)  # rows of head h at h·4:(h+1)·4
    assert np.allclose(out, concat @ W_O + mha.b_O, rtol=0, atol=1e-14)
    assert np.allclose(out, tr.head_out.sum(axis=-3) + mha.b_O, rtol=0, atol=1e-14)


def test_fused_qkv_gives_the_same_q_k_v(rng):
    mha = qkv.MultiHeadAttention(10, 4, seed=0, d_head=3, n_kv_heads=2)
    x = rng.normal(size=(7, 10))
    W = mha.fused_qkv()
    assert W.shape == (10, (4 + 2 * 2) * 3)
    fused = x @ W  # one matmul: (7, 24)
    q, k, v = np.split(fused, [4 * 3, 4 * 3 + 2 * 3], axis=-1)
    _, tr = mha(x, return_trace=True)
    assert np.allclose(steps.split_heads(q, 4), tr.q, rtol=0, atol=1e-14)
    assert np.allclose(steps.split_heads(k, 2), tr.k, rtol=0, atol=1e-14)
    assert np.allclose(steps.split_heads(v, 2), tr.v, rtol=0, atol=1e-14)


def test_one_head_equals_single_head_attention(rng):
    mha = qkv.MultiHeadAttention(6, 1, seed=4)
    x = rng.normal(size=(5, 6))
    q, k, v = x @ mha.W_Q[0], x @ mha.W_K[0], x @ mha.W_V[0]
    z = qkv.attention(q, k, v, causal=True)
    assert np.allclose(mha(x, causal=True), z @ mha.W_O[0] + mha.b_O, rtol=0, atol=1e-14)


def test_grouped_query_heads_share_k_and_v(rng):
    mha = qkv.MultiHeadAttention(12, 6, seed=0, n_kv_heads=2)
    assert mha.W_K.shape == (2, 12, 2)
    full = qkv.MultiHeadAttention.from_weights(
        mha.W_Q, np.repeat(mha.W_K, 3, 0), np.repeat(mha.W_V, 3, 0), mha.W_O, mha.b_O
    )
    x = rng.normal(size=(4, 12))
    assert np.allclose(mha(x, causal=True), full(x, causal=True), rtol=0, atol=1e-14)


def test_qkv_bias_is_added_per_head(rng):
    mha = qkv.MultiHeadAttention(4, 2, seed=0, qkv_bias=True)
    mha.b_Q = rng.normal(size=(2, 2))
    x = rng.normal(size=(3, 4))
    _, tr = mha(x, return_trace=True)
    assert np.allclose(tr.q[1], x @ mha.W_Q[1] + mha.b_Q[1])


@pytest.mark.parametrize(
    "kw,msg",
    [
        (
            dict(d_model=10, n_heads=3),
            r"d_model must be divisible by n_heads.*d_model=10, n_heads=3",
        ),
        (
            dict(d_model=12, n_heads=4, n_kv_heads=3),
            r"n_heads must be divisible by n_kv_heads.*4.*3",
        ),
        (dict(d_model=0, n_heads=1), r"d_model must be a positive integer, got 0"),
    ],
)
def test_bad_sizes(kw, msg):
    with pytest.raises(ValueError, match=msg):
        qkv.MultiHeadAttention(seed=0, **kw)


def test_from_weights_checks_shapes():
    mha = qkv.MultiHeadAttention(8, 2, seed=0)
    with pytest.raises(ValueError, match=r"W_O must have shape \(2, 4, 8\).*got \(2, 4, 7\)"):
        qkv.MultiHeadAttention.from_weights(mha.W_Q, mha.W_K, mha.W_V, np.zeros((2, 4, 7)))


def test_wrong_input_width_is_refused():
    mha = qkv.MultiHeadAttention(8, 2, seed=0)
    with pytest.raises(
        ValueError, match=r"x must have shape \(\.\.\., length, d_model=8\), got \(3, 7\)"
    ):
        mha(np.zeros((3, 7)))


def test_scale_reaches_every_head(rng):
    mha = qkv.MultiHeadAttention(8, 2, seed=0)
    x = rng.normal(size=(3, 8))
    _, tr = mha(x, scale=1.0, return_trace=True)
    assert np.array_equal(tr.scaled, tr.scores) and tr.settings["scale"] == 1.0
    _, tr = mha(x, return_trace=True)
    assert np.allclose(tr.scaled, tr.scores / 2.0)  # 1/√d_head, d_head = 4
