"""A decoding step through BLAS (rows that see every key of a long cache): the compiled step that
calls NumPy's BLAS itself, and the same step through NumPy's matmul where that BLAS cannot be
reached, against the float64 reference: one row per head (gemv) and a few (gemm), float32 and
float64, a cache's view, rows BLAS cannot read, and what is not finite."""

import numpy as np
import pytest

import qkv

pytest.importorskip("numba")

from qkv.kernels import compiled, fused  # noqa: E402


def reference(q, k, v, **kw):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    return qkv.attention(q, k, v, backend="reference", **kw)


@pytest.fixture(params=["compiled", "numpy"])
def path(request, monkeypatch):
    """Which way the step goes: "numpy" hides NumPy's BLAS from the compiled step."""
    compiled.kernels()
    if request.param == "compiled":
        assert compiled.COMPILED["blas"](np.float32) is not None, "NumPy's BLAS not found"
    else:
        monkeypatch.setitem(compiled.COMPILED, "blas", lambda dtype: None)
    return request.param


def calls(monkeypatch):
    """Count the compiled step's calls."""
    seen = []
    step = compiled.COMPILED["decode_step"]
    monkeypatch.setitem(compiled.COMPILED, "decode_step", lambda *a: seen.append(1) or step(*a))
    return seen


@pytest.mark.parametrize("H, G, S", [(6, 6, 700), (8, 2, 1500), (4, 1, 17000)])  # n = 1, 4, 4
@pytest.mark.parametrize("dtype, atol", [(np.float32, 2e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("width", [1.0, 4.0])
def test_matches_float64_reference(rng, path, monkeypatch, H, G, S, dtype, atol, width):
    q = (width * rng.standard_normal((H, 1, 32))).astype(dtype)
    k = (width * rng.standard_normal((G, S, 32))).astype(dtype)
    v = rng.standard_normal((G, S, 24)).astype(dtype)
    seen = calls(monkeypatch)
    got = qkv.attention(q, k, v, causal=True, backend="fused")
    assert got.dtype == dtype and got.shape == (H, 1, 24)
    # wider scores: each one's own rounding (≈ eps·|s|) moves its weight by as much
    np.testing.assert_allclose(got, reference(q, k, v, causal=True), atol=atol * width**2, rtol=0)
    assert len(seen) == (path == "compiled")


def test_a_caches_first_rows_and_rows_blas_cannot_read(rng, monkeypatch):
    """K and V as the first S rows of a longer buffer: the compiled step reads them in place;
    rows of stride 2 (every other feature) go through NumPy, with the same answer."""
    buffer = rng.standard_normal((2, 2, 3000, 16)).astype(np.float32)  # (K/V, heads, S_max, d)
    q = rng.standard_normal((2, 1, 16)).astype(np.float32)
    k, v = buffer[0, :, :900], buffer[1, :, :900]
    seen = calls(monkeypatch)
    got = qkv.attention(q, k, v, backend="fused")
    np.testing.assert_allclose(got, reference(q, k, v), atol=2e-6)
    assert len(seen) == 1
    k2, v2 = buffer[0, :, :900, ::2], buffer[1, :, :900, ::2]
    got = qkv.attention(q[..., :8], k2, v2, backend="fused")
    np.testing.assert_allclose(got, reference(q[..., :8], k2, v2), atol=2e-6)
    assert len(seen) == 1  # not called: the NumPy path ran


@pytest.mark.parametrize("H, G", [(3, 3), (6, 2)])
def test_what_is_not_finite_goes_to_the_reference(rng, path, H, G):
    q = rng.standard_normal((H, 1, 8)).astype(np.float32)
    k = rng.standard_normal((G, 800, 8)).astype(np.float32)
    v = rng.standard_normal((G, 800, 8)).astype(np.float32)
    for a, bad in ((v, np.inf), (v, np.nan), (k, np.nan), (q, np.inf)):
        a[-1, -1, 0] = bad  # seen by the last K/V head's rows
        assert fused.fused_attention(q, k, v, vouch=True) is None
        got = qkv.attention(q, k, v, backend="fused")
        want = reference(q, k, v)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got[:-1], want[:-1], atol=2e-6)  # the other heads
        a[-1, -1, 0] = 0.5
