"""The fused (numba) kernel against the float64 reference: shapes, masks, causal alignments,
grouped K/V heads, wide scores, decoding rows, precision, NaN and masked garbage."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

pytest.importorskip("numba")


def reference(q, k, v, **kw):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    return qkv.attention(q, k, v, backend="reference", **kw)


def problem(rng, H, G, L, S, d, d_v=None, *, width=1.0, dtype=np.float32):
    q = width * rng.standard_normal((H, L, d))
    k = width * rng.standard_normal((G, S, d))
    v = rng.standard_normal((G, S, d_v or d))
    return (a.astype(dtype) for a in (q, k, v))


SHAPES = [  # (H, G, L, S, d): odd sizes, one query (decoding), no keys, grouped K/V heads
    (1, 1, 113, 203, 59),
    (3, 3, 203, 113, 59),
    (2, 2, 1, 203, 59),
    (9, 3, 1, 77, 64),
    (6, 2, 300, 700, 32),
    (4, 1, 5, 9, 8),
    (2, 2, 7, 0, 8),
    (12, 12, 1, 1000, 64),
    (8, 2, 1, 4500, 16),  # decoding against a long cache: BLAS, 4 rows per K/V head
    (4, 2, 1, 17000, 8),  # BLAS in two key blocks (decode_blas.BLOCK = 16,384)
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True, "top-left"])
@pytest.mark.parametrize("width", [1.0, 4.0])  # 4×: scores that need the running max
def test_matches_float64_reference(rng, shape, causal, width):
    H, G, L, S, d = shape
    q, k, v = problem(rng, H, G, L, S, d, width=width)
    got = qkv.attention(q, k, v, causal=causal, backend="fused")
    assert got.dtype == np.float32 and got.shape == (H, L, d)
    np.testing.assert_allclose(got, reference(q, k, v, causal=causal), atol=5e-5, rtol=0)


@pytest.mark.parametrize("tiles", [(64, 32), (32, 64), (48, 48), (7, 5)])
@pytest.mark.parametrize("causal", [True, "top-left"])
@pytest.mark.parametrize("width", [1.0, 4.0])
def test_causal_diagonal_cut_into_row_pieces_matches_reference(rng, tiles, causal, width):
    # rows of one head take a diagonal block in pieces, each to its own last key
    from qkv.kernels import fused

    q, k, v = problem(rng, 3, 3, 150, 190, 16, width=width)
    rule = {"causal": "bottom-right" if causal is True else causal, "scale": 0.25}
    got = fused.fused_attention(q, k, v, block_q=tiles[0], block_k=tiles[1], **rule)
    want = reference(q, k, v, causal=causal, scale=0.25)
    np.testing.assert_allclose(got, want, atol=5e-5, rtol=0)


@pytest.mark.parametrize("L", [1, 3, 113])  # the decode loop (few rows) and the tiles
def test_masks_and_fully_masked_rows(rng, L):
    q, k, v = problem(rng, 4, 2, L, 203, 16, d_v=11)
    mask = rng.random((4, L, 203)) < 0.3
    mask[:, 0] = False  # query 0 sees nothing: output 0
    got = qkv.attention(q, k, v, mask=mask, causal=True, backend="fused")
    np.testing.assert_allclose(got, reference(q, k, v, mask=mask, causal=True), atol=2e-6)
    assert np.all(got[:, 0] == 0)


@pytest.mark.parametrize("L", [1, 64])
def test_masked_keys_never_leak_whatever_k_and_v_hold(rng, L):
    q, k, v = problem(rng, 2, 2, L, 300, 8)
    mask = np.ones((L, 300), bool)
    mask[:, 100:140] = False  # a preallocated cache's garbage, say
    clean = qkv.attention(q, k, v, mask=mask, backend="fused")
    k[:, 100:140], v[:, 100:120], v[:, 120:140] = np.nan, np.inf, np.nan
    np.testing.assert_array_equal(qkv.attention(q, k, v, mask=mask, backend="fused"), clean)
    # causal: the keys after each query's diagonal are masked too
    q, k, v = problem(rng, 1, 1, 200, 200, 8)
    want = qkv.attention(q, k, v, causal=True, backend="fused")
    k[:, 150], v[:, 150] = np.nan, np.nan
    got = qkv.attention(q, k, v, causal=True, backend="fused")
    # rows before key 150 are untouched (a NaN output hands the call to the reference, whose
    # float32 rounding differs from the kernel's in the last bits)
    np.testing.assert_allclose(got[:, :150], want[:, :150], rtol=1e-5, atol=1e-6)
    assert np.isnan(got[:, 150:]).all()  # rows that see it: NaN


@pytest.mark.parametrize("L, S", [(1, 90), (64, 90), (1, 700)])  # the loop, tiles, BLAS decode
def test_nan_in_a_visible_input_gives_nan(rng, L, S):
    q, k, v = problem(rng, 2, 2, L, S, 8)
    q[0, -1, 3] = np.nan
    got = qkv.attention(q, k, v, backend="fused")
    assert np.isnan(got[0, -1]).all() and not np.isnan(np.delete(got[0], -1, axis=0)).any()
    assert not np.isnan(got[1]).any()
    v[1, S // 2, 0] = np.inf  # a visible value: that column of the row is not finite
    got = qkv.attention(q, k, v, backend="fused")
    want = reference(q, k, v)
    assert np.array_equal(np.isfinite(got), np.isfinite(want)) and not np.isfinite(got[1]).all()


@pytest.mark.parametrize("L, S", [(1, 90), (64, 90), (1, 700), (1, 17000)])
def test_vouching_kernel_hands_a_non_finite_answer_back(rng, L, S):
    """With vouch=True (how the dispatcher calls it) the kernel returns None where its answer
    is not finite, on each path (the loop, the tiles, BLAS decoding in one and in two key
    blocks), and the same answer as without it where it is."""
    from qkv.kernels import fused

    q, k, v = problem(rng, 2, 2, L, S, 8)
    plain = fused.fused_attention(q, k, v, causal="bottom-right")
    assert np.array_equal(fused.fused_attention(q, k, v, causal="bottom-right", vouch=True), plain)
    for a, bad in ((v, np.inf), (v, np.nan), (k, np.nan), (q, -np.inf)):
        a[1, -1, 0] = bad  # the last query's row and the last key: every row of q[1] sees it
        assert fused.fused_attention(q, k, v, causal="bottom-right", vouch=True) is None
        unvouched = fused.fused_attention(q, k, v, causal="bottom-right")  # None: +inf scores
        assert unvouched is None or not np.isfinite(unvouched).all()
        a[1, -1, 0] = 0.5


def test_finish_tells_a_non_finite_z_from_a_row_without_weight():
    from qkv.kernels import compiled

    finish = compiled.kernels()["finish"]
    m, ell = np.zeros((1, 2), np.float32), np.ones((1, 2), np.float32)
    acc = np.ones((1, 2, 3), np.float32)
    out = np.empty((1, 1, 2, 3), np.float32)
    assert finish(m, ell, acc, out) == 0 and np.all(out == 1)
    acc[0, 1, 2] = np.inf
    assert finish(m, ell, acc, out) == 3 and out[0, 0, 1, 2] == np.inf
    ell[0, 0] = 0.0  # a row without weight is told first: its z is 0
    assert finish(m, ell, acc, out) == 2 and np.all(out[0, 0, 0] == 0)
    m[0, 1] = np.inf  # a +inf score: nothing written
    assert finish(m, ell, acc, out) == 1


@pytest.mark.parametrize("L", [1, 40])
def test_float16_accumulates_in_float32_and_float64_is_exact(rng, L):
    q, k, v = problem(rng, 3, 3, L, 500, 32, dtype=np.float16)
    got = qkv.attention(q, k, v, causal=True, backend="fused")
    assert got.dtype == np.float16
    np.testing.assert_allclose(
        got.astype(np.float64), reference(q, k, v, causal=True), atol=2e-3
    )  # float16 rounding of the result alone
    q, k, v = problem(rng, 3, 1, L, 500, 32, width=4.0, dtype=np.float64)
    np.testing.assert_allclose(
        qkv.attention(q, k, v, causal=True, backend="fused"),
        reference(q, k, v, causal=True),
        atol=1e-12,
        rtol=0,
    )


def test_scale_temperature_and_broadcast_batch(rng):
    q = rng.standard_normal((2, 1, 4, 70, 16)).astype(np.float32)  # (batch, 1, H, L, d)
    k = rng.standard_normal((3, 2, 90, 16)).astype(np.float32)  # (batch', G, S, d)
    v = rng.standard_normal((3, 2, 90, 16)).astype(np.float32)
    kw = dict(scale=0.3, temperature=0.7, causal=True)
    got = qkv.attention(q, k, v, backend="fused", **kw)
    np.testing.assert_allclose(got, reference(q, k, v, **kw), atol=2e-6)


def test_refuses_torch_tensors():
    torch = pytest.importorskip("torch")
    t = torch.zeros(2, 3)
    with pytest.raises(TypeError, match="backend='fused' runs on NumPy arrays"):
        qkv.attention(t, t, t, backend="fused")


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 140),
    st.integers(0, 140),
    st.integers(1, 40),
    st.sampled_from([False, True, "top-left"]),
    st.booleans(),
)
def test_any_shape_matches_reference(groups, r, L, S, d, causal, masked):
    rng = np.random.default_rng(L * 1000 + S)
    q, k, v = problem(rng, groups * r, groups, L, S, d, width=2.0)
    mask = rng.random((L, S)) < 0.8 if masked else None
    got = qkv.attention(q, k, v, mask=mask, causal=causal, backend="fused")
    np.testing.assert_allclose(got, reference(q, k, v, mask=mask, causal=causal), atol=2e-5)


def test_exp2_of_the_tile_pass_is_float32_exact_and_zero_far_below_the_max():
    from qkv.kernels import compiled

    x = np.linspace(-110.0, 80.0, 4001).astype(np.float32)  # log₂ units, as the pass sees them
    s = np.concatenate([x, np.float32([np.nan, -np.inf])])[None, None]  # (1, 1, n)
    m, ell = np.zeros((1, 1), np.float32), np.zeros((1, 1), np.float32)  # the unshifted path
    acc = np.zeros((1, 1, 1), np.float32)
    tile = compiled.kernels()["tile"]
    no_mask, no_bias = np.ones((1, 1, 1), bool), np.zeros((1, 1, 1, 1), np.float32)
    tile(s, m, ell, acc, np.zeros(1, np.int64), 0, False, 0, no_mask, False, no_bias, False, True)
    p = s[0, 0, : x.size].astype(np.float64)
    want = 2.0 ** x.astype(np.float64)
    kept = x >= -100
    assert np.all(np.abs(p[kept] / want[kept] - 1) < 2e-7)  # a few float32 roundings
    assert np.all(p[~kept] == 0)  # 2^x < 2^-100 of the row's largest term: exactly 0
    assert np.isnan(s[0, 0, -2]) and s[0, 0, -1] == 0 and np.isnan(ell[0, 0])


def test_every_compiled_loop_asks_for_the_full_vector_width():
    """LLVM keeps to 256-bit vectors on AVX-512 Intel processors unless a function asks for
    more: ``full_width`` puts the request in the function's LLVM code, and each compiled loop of
    the kernels and of the quantized products calls it."""
    import numba

    from qkv.kernels import fused_jit
    from qkv.models import quantized_jit

    @numba.njit("float32(float32[::1])")
    def total(x):
        fused_jit.full_width()
        return x.sum()

    assert total(np.ones(40, np.float32)) == 40
    assert '"prefer-vector-width"="512"' in total.inspect_llvm(total.signatures[0])
    from qkv.kernels import decode_jit

    loops = [fused_jit.tile, fused_jit.largest_norm, fused_jit.finish]
    loops += [decode_jit.decode, decode_jit.decode_step]
    loops += [quantized_jit.times4, quantized_jit.times8]
    for loop in loops:
        assert "full_width" in loop.py_func.__code__.co_names, loop.__name__


@pytest.mark.parametrize("way", ["loop", "blas"])
def test_a_long_decoding_step_keeps_float32_error_small_either_way(way):
    """One query per head against 8,192 keys whose values share an offset (a long float32 sum
    of like-signed terms): the compiled loop and BLAS both stay within 6e-7 of float64."""
    from qkv.kernels import decode_blas, fused

    rng = np.random.default_rng(7)
    q = rng.standard_normal((8, 1, 64), dtype=np.float32)
    k = rng.standard_normal((2, 8192, 64), dtype=np.float32)
    v = rng.standard_normal((2, 8192, 64), dtype=np.float32) + np.float32(0.5)
    keys = decode_blas.DECODE_LOOP_KEYS if way == "loop" else decode_blas.DECODE_BLAS_KEYS
    out = fused.fused_attention(q, k, v, causal="bottom-right", scale=0.125, blas_keys=keys)
    want = reference(q, k, v, causal=True, scale=0.125)
    np.testing.assert_allclose(out, want, rtol=0, atol=6e-7)


@pytest.mark.parametrize("keys", [slice(0, 300), slice(0, 600, 2)])
def test_a_decoding_step_reads_a_caches_view_in_place_where_its_rows_are_contiguous(keys):
    """A short cache as a KVCache holds it: the first keys of a longer buffer (batch 2, 3 K/V
    heads for 9 query heads). The compiled loop reads such a view in the buffer itself, one K/V
    head at a time; keys of another stride are copied for it. Both match float64."""
    from qkv.kernels import compiled, fused

    rng = np.random.default_rng(8)
    q = rng.standard_normal((2, 9, 1, 32), dtype=np.float32)
    buffer = rng.standard_normal((2, 2, 3, 1024, 32), dtype=np.float32)  # (k|v, B, G, cap, d)
    k, v = buffer[0][..., keys, :], buffer[1][..., keys, :]
    read = []
    loop = compiled.kernels()["decode"]
    compiled.kernels()["decode"] = lambda *a: read.append(a[1]) or loop(*a)
    try:
        out = fused.fused_attention(q, k, v, causal="bottom-right", scale=0.2)
    finally:
        compiled.kernels()["decode"] = loop
    np.testing.assert_allclose(out, reference(q, k, v, causal=True, scale=0.2), rtol=0, atol=2e-6)
    in_place = keys.step is None
    assert len(read) == (6 if in_place else 1)
    assert all(np.shares_memory(a, buffer) == in_place for a in read)
    assert all(a.flags.c_contiguous for a in read)  # what the loop's fast signature takes
