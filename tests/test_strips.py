"""The strip kernel (matrix products of qkv's own, ``kernels/strips_jit.py``) against the float64
reference: where the fused kernel sends its tiles there (shapes, partial panels and strips,
causal alignments, grouped K/V heads, sinks, wide scores, threads), where it does not (and the
answer is still right), what is not finite, and K's packed layout."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import qkv

pytest.importorskip("numba")

from qkv.kernels import compiled, fused, strips_jit  # noqa: E402


def reference(q, k, v, **rule):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    return qkv.attention(q, k, v, backend="reference", **rule)


def run(q, k, v, *, block_q=None, block_k=None, workers=None, **rule):
    """The fused kernel's answer and the float64 reference's, at scale 1/√d_k (which the
    kernel, called directly, does not default to)."""
    rule.setdefault("scale", q.shape[-1] ** -0.5)
    tiles = {"block_q": block_q, "block_k": block_k, "workers": workers}
    return fused.fused_attention(q, k, v, **tiles, **rule), reference(q, k, v, **rule)


@pytest.fixture
def strips(monkeypatch):
    """The strip kernel's calls, counted."""
    seen = []
    run = compiled.kernels()["strips"]
    monkeypatch.setitem(compiled.COMPILED, "strips", lambda *a: seen.append(1) or run(*a))
    return seen


def problem(rng, H, G, L, S, d, d_v, width=1.0, batch=()):
    q = width * rng.standard_normal((*batch, H, L, d))
    k = width * rng.standard_normal((*batch, G, S, d))
    v = rng.standard_normal((*batch, G, S, d_v))
    return (a.astype(np.float32) for a in (q, k, v))


NW, W = strips_jit.NW, strips_jit.W
SHAPES = [  # (H, G, L, S, d_k, d_v): rows and keys that fill no whole strip, panel or block
    (1, 1, 37, 531, 40, NW),
    (2, 1, 50, 600, 32, NW + W),  # values past the whole panels: one vector at a time
    (1, 1, 20, 90, 16, W),  # fewer values than a panel
    (2, 2, 300, 1100, 64, 2 * NW),
    (6, 2, 100, 700, 24, 4 * NW),  # grouped K/V heads: 3 query heads' rows per strip run
    (1, 1, 9, 5, 7, NW),  # fewer keys than a panel
    (2, 1, 6, 6, 64, 8 * NW),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [None, "bottom-right", "top-left"])
@pytest.mark.parametrize("width", [1.0, 4.0])  # 4×: past the bound, the running max
def test_strips_match_float64_reference(rng, strips, shape, causal, width):
    H, G, L, S, d_k, d_v = shape
    q, k, v = problem(rng, H, G, L, S, d_k, d_v, width)
    got, want = run(q, k, v, causal=causal)
    assert strips, "the strip kernel did not run"
    assert got.dtype == np.float32 and got.shape == (H, L, d_v)
    np.testing.assert_allclose(got, want, atol=5e-6 * width**2, rtol=0)


@pytest.mark.parametrize("tiles", [(7, 64), (64, 256), (256, 512)])
@pytest.mark.parametrize("workers", [1, 2])
def test_row_blocks_and_threads(rng, strips, tiles, workers):
    q, k, v = problem(rng, 3, 3, 333, 1500, 64, 64, batch=(2,))
    rule = {"causal": "bottom-right", "block_q": tiles[0], "block_k": tiles[1]}
    got, want = run(q, k, v, **rule, workers=workers)
    assert strips
    np.testing.assert_allclose(got, want, atol=5e-6, rtol=0)


@pytest.mark.parametrize("causal", [None, "bottom-right"])
def test_a_later_key_far_above_the_running_max(rng, strips, causal):
    """Keys in later blocks whose scores rise more than LEAD (log₂ units) above what a row saw
    before: those blocks go through the pass again, and the answer is the reference's."""
    q, k, v = problem(rng, 2, 2, 200, 2000, 64, NW)
    k[:, [900, 1500, 1999]] *= 60.0  # |s| up to a few hundred
    got, want = run(q, k, v, causal=causal)
    assert strips
    # scores of a few hundred: each one's float32 rounding (≈ eps·|s|) moves its weight
    np.testing.assert_allclose(got, want, atol=5e-5, rtol=0)


def test_broadcast_batches_whose_k_is_copied_per_tile(rng, strips):
    """q and K/V broadcast against each other along different batch axes: a tile's K is a
    copy made for the tile (``layout.Units.take``)."""
    q = rng.standard_normal((2, 1, 4, 70, 16)).astype(np.float32)  # (batch, 1, H, L, d)
    k = rng.standard_normal((3, 2, 90, 16)).astype(np.float32)  # (batch', G, S, d)
    v = rng.standard_normal((3, 2, 90, NW)).astype(np.float32)
    for workers in (1, 2):
        got, want = run(q, k, v, causal="bottom-right", temperature=0.7, workers=workers)
        np.testing.assert_allclose(got, want, atol=5e-6, rtol=0)
    assert strips


def test_a_packed_k_is_not_taken_for_another_at_the_same_address(rng):
    """K packed once per call, known by its data's address: a copy freed after its tile must
    not leave its address to the next copy (same size, made right after) while its packing is
    kept."""
    plan = fused._FusedPlan(
        2, 8, 40, 1, None, 8, 16, 1, 1.0, np.float32, 4, NW, finite_v=True, own=True
    )
    first, second = (rng.standard_normal((1, 40, 4)).astype(np.float32) for _ in range(2))
    copy = np.stack([first[0]])  # as Units.take makes it
    plan._packed(copy[0])
    del copy
    again = np.stack([second[0]])  # the allocator may hand out the same address
    got = plan._packed(again[0])
    want = np.empty_like(got)
    strips_jit.pack(second[0], want)
    np.testing.assert_array_equal(got, want)


def test_values_past_the_panels_from_a_wider_buffer(rng, strips):
    """V a view of a wider buffer (rows longer than d_v), d_v a panel and a vector: the strips
    read its rows where they lie, the last vector too."""
    q, k, wide = problem(rng, 2, 2, 70, 600, 32, 2 * NW)
    v = wide[..., : NW + W]
    got, want = run(q, k, v, causal="bottom-right")
    assert strips
    np.testing.assert_allclose(got, want, atol=5e-6, rtol=0)


def test_sinks_and_a_scale(rng, strips):
    q, k, v = problem(rng, 4, 2, 50, 300, 32, NW)
    sinks = rng.standard_normal(4).astype(np.float32)
    rule = {"causal": "bottom-right", "scale": 0.3, "sinks": sinks}
    got, want = run(q, k, v, **rule)
    assert strips
    np.testing.assert_allclose(got, want, atol=5e-6, rtol=0)


def test_only_what_the_strips_take_goes_there(rng, strips):
    """float64, d_v not a whole number of vectors, a mask, a bias, a softcap, V's rows of
    stride 2: the tile path, with the same answer."""
    q, k, v = problem(rng, 2, 2, 40, 200, 16, 2 * NW)
    odd = v[..., : NW + 4]
    strided = np.ascontiguousarray(np.repeat(v, 2, axis=-1))[..., ::2]
    mask = rng.random((40, 200)) < 0.8
    bias = rng.standard_normal((40, 200)).astype(np.float32)
    for args, rule in [
        ((q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)), {}),
        ((q, k, odd), {}),
        ((q, k, v), {"mask": mask}),
        ((q, k, v), {"bias": bias}),
        ((q, k, v), {"softcap": 5.0}),
        ((q, k, strided), {}),
    ]:
        got, want = run(*args, **rule)
        np.testing.assert_allclose(got, want, atol=5e-6, rtol=0)
    assert not strips


def test_what_is_not_finite(rng, strips):
    """qkv.attention's answer where an input is not finite, with the strip kernel in the fused
    backend: a NaN value that every row sees (the strips run), one the causal mask hides from
    some rows (V is checked first: the tile path), a NaN query, an infinite key."""
    q, k, v = problem(rng, 1, 1, 30, 30, 16, NW)
    nan_v, nan_q, inf_k = v.copy(), q.copy(), k.copy()
    nan_v[0, 7, 3], nan_q[0, 4, 0], inf_k[0, 9, 2] = np.nan, np.nan, np.inf
    for args, causal, by_strips in [
        ((q, k, nan_v), False, True),
        ((q, k, nan_v), True, False),
        ((nan_q, k, v), False, True),
        ((q, inf_k, v), True, True),
    ]:
        strips.clear()
        got = qkv.attention(*args, causal=causal, backend="fused")
        want = reference(*args, causal=causal)
        np.testing.assert_allclose(got, want, atol=5e-6, rtol=0)  # NaN where it is NaN
        assert bool(strips) == by_strips


def test_k_packed_in_panels(rng):
    """Panel P holds keys P·NW … as d rows of NW (a key's features down a column), zero past
    the last key."""
    k = rng.standard_normal((2 * NW + 3, 5)).astype(np.float32)
    kp = np.full(strips_jit.packed_size(*k.shape), np.nan, np.float32)
    strips_jit.pack(k, kp)
    padded = np.zeros((3 * NW, 5), np.float32)
    padded[: len(k)] = k
    want = padded.reshape(3, NW, 5).transpose(0, 2, 1).ravel()
    np.testing.assert_array_equal(kp, want)


@pytest.mark.slow
def test_sixteen_lanes_where_the_processor_has_512_bit_vectors(tmp_path):
    """The code for 512-bit vectors (W = 16, panels of 64 keys), compiled in a child process
    told its processor has them (LLVM splits the vectors where it does not) and given a numba
    cache of its own: the same answers as the float64 reference."""
    script = textwrap.dedent(
        """
        import dataclasses
        import numpy as np
        from qkv.kernels import processor
        here = processor.current()
        processor.current = lambda: dataclasses.replace(here, vector_bits=512)
        import qkv
        from qkv.kernels import compiled, fused, strips_jit
        assert strips_jit.W == 16 and strips_jit.NW == 64
        rng = np.random.default_rng(0)
        for H, G, L, S, d_k, d_v, causal, width in [
            (2, 2, 100, 700, 64, 64, None, 1.0),
            (3, 1, 37, 531, 40, 128, "bottom-right", 4.0),
            (1, 1, 9, 5, 7, 64, "top-left", 1.0),
            (2, 1, 60, 300, 32, 96, None, 1.0),  # a panel and two vectors of values
            (1, 1, 50, 400, 16, 112, "top-left", 4.0),  # a panel and three
            (1, 1, 40, 200, 16, 16, "bottom-right", 1.0),  # one vector
        ]:
            q = (width * rng.standard_normal((H, L, d_k))).astype(np.float32)
            k = (width * rng.standard_normal((G, S, d_k))).astype(np.float32)
            v = rng.standard_normal((G, S, d_v)).astype(np.float32)
            rule = {"causal": causal, "scale": d_k**-0.5}
            seen = []
            run = compiled.kernels()["strips"]
            compiled.COMPILED["strips"] = lambda *a: seen.append(1) or run(*a)
            got = fused.fused_attention(q, k, v, **rule)
            compiled.COMPILED["strips"] = run
            wide = [a.astype(np.float64) for a in (q, k, v)]
            want = qkv.attention(*wide, **rule, backend="reference")
            assert seen, "the strip kernel did not run"
            np.testing.assert_allclose(got, want, atol=5e-6 * width**2, rtol=0)
        """
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
