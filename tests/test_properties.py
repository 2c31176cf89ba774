"""Properties of attention that hold for any input (hypothesis)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv
from qkv.kernels import dispatch
from qkv.kernels.blocked import blocked_attention

dims = st.integers(1, 7)


@st.composite
def qkv_inputs(draw, max_len=9):
    L, S = draw(st.integers(1, max_len)), draw(st.integers(1, max_len))
    d_k, d_v = draw(dims), draw(dims)
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    return rng.normal(size=(L, d_k)), rng.normal(size=(S, d_k)), rng.normal(size=(S, d_v)), rng


@given(qkv_inputs(), st.floats(0.05, 10))
def test_rows_sum_to_one_and_output_lies_within_v_range(inputs, tau):
    q, k, v, _ = inputs
    out, tr = qkv.attention(q, k, v, temperature=tau, return_trace=True)
    assert np.allclose(tr.weights.sum(-1), 1.0, atol=1e-12)
    assert np.all(tr.weights >= 0)
    assert np.all(out >= v.min(0) - 1e-12) and np.all(out <= v.max(0) + 1e-12)


@given(qkv_inputs())
def test_permuting_keys_with_their_values_changes_nothing(inputs):
    q, k, v, rng = inputs
    p = rng.permutation(k.shape[0])
    assert np.allclose(qkv.attention(q, k[p], v[p]), qkv.attention(q, k, v), atol=1e-12)


@given(qkv_inputs(), st.floats(-50, 50))
def test_adding_a_constant_to_a_score_row_changes_nothing(inputs, c):
    q, k, v, _ = inputs
    w = qkv.steps.softmax(qkv.steps.scores(q, k))
    w_shift = qkv.steps.softmax(qkv.steps.scores(q, k) + c)
    assert np.allclose(w, w_shift, atol=1e-12)


@given(qkv_inputs())
def test_masked_keys_have_no_influence(inputs):
    q, k, v, rng = inputs
    S = k.shape[0]
    mask = rng.random(S) > 0.5
    mask[rng.integers(S)] = True
    k2, v2 = k.copy(), v.copy()
    k2[~mask] = rng.normal(size=k2[~mask].shape) * 100  # change only hidden keys
    v2[~mask] = rng.normal(size=v2[~mask].shape) * 100
    a = qkv.attention(q, k, v, mask=mask)
    assert np.allclose(a, qkv.attention(q, k2, v2, mask=mask), atol=1e-12)
    assert np.allclose(a, qkv.attention(q, k[mask], v[mask]), atol=1e-12)


@given(st.integers(2, 9), st.integers(0, 2**32 - 1))
def test_changing_a_future_token_changes_no_past_output(T, seed):
    rng = np.random.default_rng(seed)
    mha = qkv.MultiHeadAttention(6, 3, seed=seed)
    x = rng.normal(size=(T, 6))
    t = int(rng.integers(1, T))
    x2 = x.copy()
    x2[t:] = rng.normal(size=x2[t:].shape)
    a, b = mha(x, causal=True), mha(x2, causal=True)
    assert np.allclose(a[:t], b[:t], atol=1e-14)


@given(qkv_inputs(), st.floats(0.05, 10))
def test_temperature_equals_dividing_the_scaled_scores(inputs, tau):
    q, k, v, _ = inputs
    d_k = q.shape[-1]
    assert np.allclose(
        qkv.attention(q, k, v, temperature=tau), qkv.attention(q / tau, k, v), atol=1e-10
    )
    assert np.allclose(
        qkv.attention(q, k, v, temperature=tau),
        qkv.attention(q, k, v, scale=1 / np.sqrt(d_k) / tau),
        atol=1e-12,
    )


@settings(max_examples=30)
@given(st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_cached_decode_equals_full_pass(T, seed):
    rng = np.random.default_rng(seed)
    mha = qkv.MultiHeadAttention(8, 4, seed=seed, n_kv_heads=2)
    x = rng.normal(size=(T, 8))
    cache = qkv.KVCache()
    steps = [mha(x[t : t + 1], causal=True, cache=cache) for t in range(T)]
    assert np.allclose(np.concatenate(steps), mha(x, causal=True), atol=1e-13)


# ---- more invariants: masks, backends, symmetries, temperature --------------------------

KERNELS = [b for b in dispatch.BACKENDS if b not in ("auto", "reference")]


@st.composite
def masked_inputs(draw, max_len=9):
    q, k, v, rng = draw(qkv_inputs(max_len))
    mask = rng.random((q.shape[0], k.shape[0])) > draw(st.floats(0, 1))
    return q, k, v, mask, rng


@settings(max_examples=40)
@given(masked_inputs())
def test_rows_sum_to_one_or_zero_and_zero_rows_are_the_dead_ones(inputs):
    q, k, v, mask, _ = inputs
    w = qkv.attention_weights(q, k, mask=mask)
    alive = mask.any(-1)
    assert np.allclose(w.sum(-1), np.where(alive, 1.0, 0.0), atol=1e-12)
    assert np.all(w[~mask] == 0)
    assert np.all(qkv.attention(q, k, v, mask=mask)[~alive] == 0)


@settings(max_examples=25, deadline=None)
@given(
    masked_inputs(max_len=40),
    st.sampled_from([None, "bottom-right", "top-left"]),
    st.integers(1, 9),
    st.integers(1, 17),
)
def test_blocked_kernel_equals_the_reference_for_any_tiling(inputs, causal, bq, bk):
    q, k, v, mask, _ = inputs
    ref = qkv.attention(q, k, v, mask=mask, causal=causal or False, backend="reference")
    out = blocked_attention(
        q,
        k,
        v,
        mask=mask,
        causal=causal,
        scale=1 / np.sqrt(q.shape[-1]),
        block_q=bq,
        block_k=bk,
        workers=2,
    )
    assert np.allclose(out, ref, rtol=0, atol=1e-12)


@settings(max_examples=20, deadline=None)  # the first call imports torch
@given(masked_inputs(), st.sampled_from([False, True]))
def test_every_kernel_equals_the_reference(inputs, causal):
    q, k, v, mask, _ = inputs
    ref = qkv.attention(q, k, v, mask=mask, causal=causal, backend="reference")
    for backend in KERNELS:
        out = qkv.attention(q, k, v, mask=mask, causal=causal, backend=backend)
        assert np.allclose(out, ref, rtol=0, atol=1e-12), backend


@given(masked_inputs())
def test_masking_a_key_equals_deleting_it(inputs):
    q, k, v, mask, rng = inputs
    keep = rng.random(k.shape[0]) > 0.4
    row_mask = np.broadcast_to(keep, mask.shape)
    deleted = qkv.attention(q, k[keep], v[keep]) if keep.any() else np.zeros((len(q), v.shape[1]))
    assert np.allclose(qkv.attention(q, k, v, mask=row_mask), deleted, atol=1e-12)


@given(qkv_inputs())
def test_permuting_queries_permutes_the_output_rows(inputs):
    q, k, v, rng = inputs
    p = rng.permutation(q.shape[0])
    assert np.allclose(qkv.attention(q[p], k, v), qkv.attention(q, k, v)[p], atol=1e-12)


@given(qkv_inputs(), st.floats(0.1, 10), st.floats(-5, 5))
def test_rescaling_q_against_k_and_shifting_every_key_change_nothing(inputs, a, shift):
    # (a·q)·(k/a) = q·k; q·(k + u) = q·k + q·u, the same for every key of a row
    q, k, v, rng = inputs
    u = rng.normal(size=k.shape[1]) * shift
    base = qkv.attention(q, k, v)
    assert np.allclose(qkv.attention(q * a, k / a, v), base, atol=1e-10)
    assert np.allclose(qkv.attention(q, k + u, v), base, atol=1e-10)


@given(masked_inputs(), st.floats(-10, 10))
def test_adding_a_vector_to_every_value_shifts_every_seen_row_by_it(inputs, c):
    q, k, v, mask, _ = inputs
    alive = mask.any(-1)[:, None]
    shifted = qkv.attention(q, k, v + c, mask=mask)
    assert np.allclose(shifted, qkv.attention(q, k, v, mask=mask) + c * alive, atol=1e-10)


@given(qkv_inputs(), st.floats(0.05, 5), st.floats(1.01, 4))
def test_a_lower_temperature_sharpens_every_row(inputs, tau, factor):
    q, k, _, _ = inputs
    hot = qkv.attention_weights(q, k, temperature=tau * factor)
    cold = qkv.attention_weights(q, k, temperature=tau)
    assert np.all(cold.max(-1) >= hot.max(-1) - 1e-12)
    assert np.all(qkv.steps.entropy(cold) <= qkv.steps.entropy(hot) + 1e-9)
