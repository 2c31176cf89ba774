"""The kernels (blocked, torch) and the choice among them, against the reference path (float64)
and torch."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv
from qkv.kernels import blocked as blocked_module
from qkv.kernels.blocked import blocked_attention

ALIGNS = (None, "bottom-right", "top-left")


def reference(q, k, v, *, mask=None, causal=None, scale=None, temperature=1.0):
    return qkv.attention(
        q,
        k,
        v,
        mask=mask,
        causal=causal or False,
        scale=scale,
        temperature=temperature,
        backend="reference",
    )


def blocked(q, k, v, *, mask=None, causal=None, scale=None, temperature=1.0, **tiles):
    """The kernel as the blocked backend calls it, with chosen tile sizes."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    return blocked_attention(
        q, k, v, mask=mask, causal=causal, scale=scale, temperature=temperature, **tiles
    )


def draw(rng, shape, dtype=np.float64, size=3.0):
    return rng.uniform(-size, size, shape).astype(dtype)


@st.composite
def problems(draw_, dtype=np.float64):
    """q, k, v, mask and settings with odd sizes, heads (grouped or not), masks, alignments."""
    rng = np.random.default_rng(draw_(st.integers(0, 2**32 - 1)))
    L = draw_(st.integers(0, 40))
    S = draw_(st.integers(0, 45))
    d_k, d_v = draw_(st.integers(1, 13)), draw_(st.integers(1, 7))
    heads = draw_(st.sampled_from([(), (3, 3), (4, 2), (4, 1), (2, 3, 3)]))  # (H, G) or batch
    if heads == ():
        q_lead = k_lead = ()
    elif len(heads) == 2:
        q_lead, k_lead = (heads[0],), (heads[1],)
    else:
        q_lead, k_lead = heads, heads
    size = draw_(st.sampled_from([0.3, 3.0, 12.0]))  # scores from tiny to ±hundreds
    q, k = draw(rng, (*q_lead, L, d_k), dtype, size), draw(rng, (*k_lead, S, d_k), dtype, size)
    v = draw(rng, (*k_lead, S, d_v), dtype)
    mask = None
    if draw_(st.booleans()):
        mask_lead = draw_(st.sampled_from([(), q_lead]))
        mask = rng.random((*mask_lead, L, S)) < draw_(st.sampled_from([0.3, 0.8, 1.0]))
        if L and draw_(st.booleans()):
            mask[..., rng.integers(L), :] = False  # a fully masked row
    settings_ = {
        "mask": mask,
        "causal": draw_(st.sampled_from(ALIGNS)),
        "scale": draw_(st.sampled_from([None, 1.0, 0.37])),
        "temperature": draw_(st.sampled_from([1.0, 0.5, 2.5])),
    }
    tiles = {
        "block_q": draw_(st.integers(1, 40)),
        "block_k": draw_(st.integers(1, 23)),
        "workers": draw_(st.sampled_from([1, 2])),
    }
    return q, k, v, settings_, tiles


@settings(max_examples=150, deadline=None)
@given(problems())
def test_blocked_equals_reference_in_float64(problem):
    q, k, v, kw, tiles = problem
    expected = reference(q, k, v, **kw)
    got = blocked(q, k, v, **kw, **tiles)
    assert got.shape == expected.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(problems(dtype=np.float32))
def test_blocked_float32_error_is_within_twice_the_references(problem):
    q, k, v, kw, tiles = problem
    # Keep |scores| ≤ 8, where softmax is well conditioned. (Past that, exp turns the float32
    # rounding of a score s into |s|·eps relative error whichever way s was rounded, so two
    # correct float32 paths differ by chance; test_unshifted_and_shifted_tiles_both_match
    # checks large scores against that bound instead.)
    factor = (kw["scale"] or 1 / np.sqrt(q.shape[-1])) / kw["temperature"]
    s_max = factor * np.abs(q).max(initial=0) * np.abs(k).max(initial=0) * q.shape[-1]
    q = (q * min(1.0, 8 / s_max) if s_max > 0 else q).astype(np.float32)
    truth = reference(*(a.astype(np.float64) for a in (q, k, v)), **kw)
    ref32 = reference(q, k, v, **kw)
    got = blocked(q, k, v, **kw, **tiles)
    assert got.dtype == np.float32
    if truth.size == 0:
        return
    # the floor (a few float32 ulps of the output's size) covers cases where ref32 is exact
    floor = 8 * np.finfo(np.float32).eps * max(1.0, float(np.abs(truth).max()))
    err_ref, err_got = np.abs(ref32 - truth).max(), np.abs(got - truth).max()
    assert err_got <= max(2 * err_ref, floor), (err_got, err_ref)


@pytest.mark.parametrize("causal", ALIGNS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_odd_shapes_through_the_public_api(causal, dtype):
    rng = np.random.default_rng(113)
    q, k, v = (
        draw(rng, (2, 113, 59), dtype),
        draw(rng, (2, 203, 59), dtype),
        draw(rng, (2, 203, 31), dtype),
    )
    mask = rng.random((113, 203)) < 0.6
    expected = reference(
        *(a.astype(np.float64) for a in (q, k, v)), mask=mask, causal=causal, temperature=0.7
    )
    got = qkv.attention(
        q, k, v, mask=mask, causal=causal or False, temperature=0.7, backend="blocked"
    )
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 if dtype == np.float64 else 1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shifted", [False, True])
def test_unshifted_and_shifted_tiles_both_match(dtype, shifted):
    # small scores: the kernel may skip the running-max shift; scores of ±hundreds: it must not
    size = (16.0 if dtype == np.float64 else 6.0) if shifted else 0.5
    rng = np.random.default_rng(16)
    q, k, v = (
        draw(rng, (2, 90, 32), dtype, size),
        draw(rng, (2, 130, 32), dtype, size),
        draw(rng, (2, 130, 8), dtype),
    )
    mask = rng.random((90, 130)) < 0.8
    mask[7] = False
    qs = (q[0] / np.sqrt(32))[None]
    norm = blocked_module._key_norms(k[:1].astype(np.float32))  # (1,): the unit's largest |k_j|
    bound = float(np.sqrt((qs.astype(np.float32) ** 2).sum(-1).max()) * norm[0])
    assert (bound > blocked_module.QUIET[np.dtype(dtype).type]) == shifted
    truth = reference(*(a.astype(np.float64) for a in (q, k, v)), mask=mask, causal=True)
    got = blocked(q, k, v, mask=mask, causal="bottom-right", block_q=32, block_k=40)
    assert np.isfinite(got).all() and np.all(got[:, 7] == 0)
    if dtype == np.float64:
        np.testing.assert_allclose(got, truth, rtol=0, atol=1e-12)
    else:  # exp's condition number is |s|: allow a few roundings of the largest score
        s_max = float(np.abs(np.einsum("hld,hsd->hls", q, k)).max()) / np.sqrt(32)
        atol = 4 * np.finfo(np.float32).eps * max(1.0, s_max) * float(np.abs(v).max())
        np.testing.assert_allclose(got, truth, rtol=0, atol=atol)


def test_causal_alignments_differ_where_they_should():
    # L=3 queries, S=5 keys: bottom-right lets query 0 see keys 0..2, top-left only key 0
    rng = np.random.default_rng(0)
    q, k, v = draw(rng, (3, 4)), draw(rng, (5, 4)), draw(rng, (5, 2))
    br = blocked(q, k, v, causal="bottom-right", block_q=1, block_k=2)
    tl = blocked(q, k, v, causal="top-left", block_q=1, block_k=2)
    np.testing.assert_allclose(tl[0], v[0], atol=1e-15)  # sees only key 0
    np.testing.assert_allclose(br[2], reference(q[2:], k, v)[0], atol=1e-15)  # sees all 5 keys
    assert not np.allclose(br[0], tl[0])


def test_fully_masked_rows_give_zero_and_the_rest_are_untouched():
    rng = np.random.default_rng(1)
    q, k, v = draw(rng, (2, 7, 5)), draw(rng, (2, 11, 5)), draw(rng, (2, 11, 3))
    mask = rng.random((2, 7, 11)) < 0.5
    mask[0, 3] = False
    mask[1, :2] = False
    q[0, 3] = np.nan  # a row that sees nothing gives 0 even with a NaN query
    got = qkv.attention(q, k, v, mask=mask, backend="blocked")
    assert np.all(got[0, 3] == 0) and np.all(got[1, :2] == 0)
    live = mask.any(-1)
    np.testing.assert_allclose(got[live], reference(q, k, v, mask=mask)[live], atol=1e-12)


def test_bottom_right_with_more_queries_than_keys_zeroes_the_early_rows():
    rng = np.random.default_rng(2)
    q, k, v = draw(rng, (9, 4)), draw(rng, (4, 4)), draw(rng, (4, 3))
    got = blocked(q, k, v, causal="bottom-right", block_q=2, block_k=3)
    assert np.all(got[:5] == 0)
    np.testing.assert_allclose(got, reference(q, k, v, causal="bottom-right"), atol=1e-12)


def test_nan_in_what_a_row_sees_propagates_and_stays_in_that_row():
    rng = np.random.default_rng(3)
    q, k, v = draw(rng, (6, 4)), draw(rng, (8, 4)), draw(rng, (8, 2))
    q[1, 0] = np.nan
    got = blocked(q, k, v, block_q=2, block_k=3)
    assert np.isnan(got[1]).all() and not np.isnan(np.delete(got, 1, axis=0)).any()
    q[1, 0] = 0.0
    k[5, 2] = np.nan  # key 5: seen by rows 5.. under top-left causal, by every row without
    got = blocked(q, k, v, causal="top-left", block_q=2, block_k=3)
    assert not np.isnan(got[:5]).any() and np.isnan(got[5:]).all()
    assert np.isnan(blocked(q, k, v, block_q=2, block_k=3)).all()


def test_one_query_decoding_against_a_long_grouped_cache():
    rng = np.random.default_rng(4)
    q, k, v = draw(rng, (2, 8, 1, 16)), draw(rng, (2, 2, 5000, 16)), draw(rng, (2, 2, 5000, 16))
    got = qkv.attention(q, k, v, causal=True, backend="blocked")
    # independent float64 reference: repeat the K/V heads, then softmax by einsum
    k_rep, v_rep = np.repeat(k, 4, axis=1), np.repeat(v, 4, axis=1)
    s = np.einsum("bhld,bhsd->bhls", q, k_rep) / 4.0
    w = np.exp(s - s.max(-1, keepdims=True))
    expected = np.einsum("bhls,bhsd->bhld", w / w.sum(-1, keepdims=True), v_rep)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_empty_sizes():
    rng = np.random.default_rng(5)
    assert np.array_equal(
        qkv.attention(draw(rng, (3, 4)), np.zeros((0, 4)), np.zeros((0, 2)), backend="blocked"),
        np.zeros((3, 2)),
    )
    assert qkv.attention(
        np.zeros((0, 4)), draw(rng, (5, 4)), draw(rng, (5, 2)), backend="blocked"
    ).shape == (0, 2)


def test_threads_do_not_change_a_single_bit():
    rng = np.random.default_rng(6)
    q, k, v = (draw(rng, (3, 70, 8), np.float32) for _ in range(3))
    one = blocked(q, k, v, causal="bottom-right", block_q=16, block_k=16, workers=1)
    two = blocked(q, k, v, causal="bottom-right", block_q=16, block_k=16, workers=2)
    assert np.array_equal(one, two)


def test_float16_inputs_come_back_as_float16():
    rng = np.random.default_rng(7)
    q, k, v = (draw(rng, (40, 8), np.float16) for _ in range(3))
    got = qkv.attention(q, k, v, backend="blocked")
    assert got.dtype == np.float16
    expected = reference(*(a.astype(np.float64) for a in (q, k, v)))
    np.testing.assert_allclose(got, expected, atol=2e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_no_L_by_S_allocation(causal):
    L = S = 4096
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((L, 16), dtype=np.float32) for _ in range(3))
    tracemalloc.start()
    try:
        qkv.attention(q, k, v, causal=causal, backend="blocked")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < L * S * 4 / 16, f"peak {peak / 2**20:.1f} MiB vs scores {L * S * 4 / 2**20} MiB"


def test_a_mask_shared_by_heads_is_not_copied_per_head():
    L = S = 4096
    rng = np.random.default_rng(15)
    q, k, v = (rng.standard_normal((2, L, 16), dtype=np.float32) for _ in range(3))
    mask = rng.random((L, S)) < 0.9  # (L, S), broadcast over both heads
    tracemalloc.start()
    try:
        got = qkv.attention(q, k, v, mask=mask, backend="blocked")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < L * S / 4, f"peak {peak / 2**20:.1f} MiB vs mask {L * S / 2**20} MiB"
    rows = [0, 1234, L - 1]
    expected = reference(
        q[:, rows].astype(np.float64), k.astype(np.float64), v.astype(np.float64), mask=mask[rows]
    )
    np.testing.assert_allclose(got[:, rows], expected, atol=1e-5)


# ---- dispatch and shared validation ----------------------------------------------------------

BAD_INPUTS = [
    (dict(q=np.ones((3, 4)), k=np.ones((5, 3)), v=np.ones((5, 2))), {}),
    (dict(q=np.ones((3, 4)), k=np.ones((5, 4)), v=np.ones((6, 2))), {}),
    (dict(q=np.ones(4), k=np.ones((5, 4)), v=np.ones((5, 2))), {}),
    (dict(q=np.ones((3, 4)), k=np.ones((5, 4)), v=np.ones((5, 2))), {"mask": np.ones((3, 5))}),
    (
        dict(q=np.ones((3, 4)), k=np.ones((5, 4)), v=np.ones((5, 2))),
        {"mask": np.ones((4, 5), bool)},
    ),
    (dict(q=np.ones((3, 4)), k=np.ones((5, 4)), v=np.ones((5, 2))), {"causal": "left"}),
    (dict(q=np.ones((3, 4)), k=np.ones((5, 4)), v=np.ones((5, 2))), {"temperature": 0}),
    (dict(q=np.ones((3, 4)), k=np.ones((5, 4)), v=np.ones((5, 2))), {"scale": "big"}),
    (dict(q=np.ones((3, 2, 4)), k=np.ones((2, 5, 4)), v=np.ones((2, 5, 2))), {}),
]


@pytest.mark.parametrize("arrays, kw", BAD_INPUTS)
@pytest.mark.parametrize("backend", ["blocked", "auto"])
def test_bad_input_gets_the_reference_error(arrays, kw, backend):
    with pytest.raises((ValueError, TypeError)) as ref_err:
        qkv.attention(**arrays, **kw, backend="reference")
    with pytest.raises(ref_err.type) as err:
        qkv.attention(**arrays, **kw, backend=backend)
    assert str(err.value) == str(ref_err.value)


def test_backend_names_and_traces():
    q = np.ones((2, 3))
    with pytest.raises(ValueError, match="backend must be one of"):
        qkv.attention(q, q, q, backend="fastest")
    with pytest.raises(ValueError, match="return_trace=True needs every step"):
        qkv.attention(q, q, q, backend="blocked", return_trace=True)
    with pytest.raises(ValueError, match="return_trace=True needs every step"):
        qkv.MultiHeadAttention(4, 2, seed=0)(np.ones((3, 4)), return_trace=True, backend="torch")
    big = np.random.default_rng(9).standard_normal((300, 300))
    out, trace = qkv.attention(big, big, big, return_trace=True)  # auto: the reference path
    assert trace["weights"].shape == (300, 300)
    np.testing.assert_allclose(out, qkv.attention(big, big, big, backend="blocked"), atol=1e-12)


def test_auto_picks_by_size_and_library():
    from qkv.checks import problem
    from qkv.kernels import fused
    from qkv.kernels.dispatch import choose

    small, big = problem(*[np.ones((8, 4))] * 3), problem(*[np.ones((1024, 4))] * 3)
    step = problem(np.ones((1, 4)), np.ones((8, 4)), np.ones((8, 4)))  # one decoding query
    assert choose("auto", small) == "reference"
    assert choose("auto", big) == ("fused" if fused.available() else "blocked")
    assert choose("auto", step) == ("fused" if fused.available() else "reference")
    assert choose("auto", big, return_trace=True) == "reference"


def test_multihead_decoding_with_a_cache_matches_one_causal_pass():
    mha = qkv.MultiHeadAttention(d_model=24, n_heads=4, seed=0, n_kv_heads=2)
    x = np.random.default_rng(10).standard_normal((1, 40, 24))
    whole = mha(x, causal=True, backend="reference")
    cache = qkv.KVCache()
    steps = [mha(x[:, :30], causal=True, cache=cache, backend="blocked")]
    steps += [
        mha(x[:, t : t + 1], causal=True, cache=cache, backend="blocked") for t in range(30, 40)
    ]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), whole, rtol=0, atol=1e-12)


# ---- the torch backend ----------------------------------------------------------------------


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="torch is not installed (pip install torch)")


@pytest.mark.parametrize("causal", ALIGNS)
def test_torch_backend_matches_the_reference_and_sdpa(torch, causal):
    rng = np.random.default_rng(11)
    q, k, v = draw(rng, (2, 4, 13, 8)), draw(rng, (2, 2, 17, 8)), draw(rng, (2, 2, 17, 5))
    mask = rng.random((4, 13, 17)) < 0.7
    mask[1, 2] = False  # a fully masked row: torch alone would give NaN
    tq, tk, tv, tm = (torch.from_numpy(a) for a in (q, k, v, mask))
    got = qkv.attention(tq, tk, tv, mask=tm, causal=causal or False, temperature=0.6)
    assert isinstance(got, torch.Tensor)
    expected = reference(q, k, v, mask=mask, causal=causal, temperature=0.6)
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-12)
    assert np.all(got.numpy()[:, 1, 2] == 0)
    # the same call straight to torch, where torch's conventions agree with qkv's
    plain = qkv.attention(tq, tk, tv, backend="torch")
    sdpa = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True)
    np.testing.assert_allclose(plain.numpy(), sdpa.numpy(), rtol=0, atol=1e-15)


def test_torch_backend_decode_aligns_bottom_right(torch):
    # torch's own is_causal=True would let one query see only key 0; qkv's sees all keys
    rng = np.random.default_rng(12)
    q, k, v = draw(rng, (3, 1, 8)), draw(rng, (3, 50, 8)), draw(rng, (3, 50, 4))
    got = qkv.attention(*(torch.from_numpy(a) for a in (q, k, v)), causal=True)
    np.testing.assert_allclose(got.numpy(), reference(q, k, v), rtol=0, atol=1e-12)


def test_torch_backend_passes_gradients(torch):
    rng = np.random.default_rng(13)
    arrays = [draw(rng, (2, 9, 6)), draw(rng, (2, 11, 6)), draw(rng, (2, 11, 3))]
    grads = []
    for backend in ("torch", "reference"):
        tensors = [torch.tensor(a, requires_grad=True) for a in arrays]
        qkv.attention(*tensors, causal=True, backend=backend).sum().backward()
        grads.append([t.grad.numpy() for t in tensors])
    for g_torch, g_ref in zip(*grads, strict=False):
        np.testing.assert_allclose(g_torch, g_ref, rtol=0, atol=1e-12)


def test_torch_backend_with_numpy_inputs_tensors_to_blocked_and_no_keys(torch):
    rng = np.random.default_rng(14)
    q, k, v = draw(rng, (5, 4)), draw(rng, (7, 4)), draw(rng, (7, 2))
    got = qkv.attention(q, k, v, backend="torch")
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, reference(q, k, v), rtol=0, atol=1e-12)
    with pytest.raises(TypeError, match="backend='blocked' runs on NumPy arrays"):
        qkv.attention(*(torch.from_numpy(a) for a in (q, k, v)), backend="blocked")
    empty = qkv.attention(
        torch.from_numpy(q),
        torch.zeros(0, 4, dtype=torch.float64),
        torch.zeros(0, 2, dtype=torch.float64),
    )
    assert torch.equal(empty, torch.zeros(5, 2, dtype=torch.float64))


def test_torch_backend_broadcasts_leading_axes_like_the_reference(torch):
    rng = np.random.default_rng(17)
    q, k, v = draw(rng, (3, 2, 4, 5, 8)), draw(rng, (3, 1, 4, 9, 8)), draw(rng, (2, 4, 9, 3))
    mask = rng.random((5, 9)) < 0.6
    got = qkv.attention(
        *(torch.from_numpy(a) for a in (q, k, v)), mask=torch.from_numpy(mask), causal=True
    )
    expected = reference(q, k, v, mask=mask, causal=True)
    assert tuple(got.shape) == expected.shape == (3, 2, 4, 5, 3)
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-12)
