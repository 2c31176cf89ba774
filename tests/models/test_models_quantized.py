"""Weights kept as GGUF codes (models/quantized.py) against gguf's own dequantization and
float64 products."""

import numpy as np
import pytest

from qkv.models import quantized

pytest.importorskip("numba")
gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize, quantize  # noqa: E402

KINDS = {"Q4_1": gguf.GGMLQuantizationType.Q4_1, "Q8_0": gguf.GGMLQuantizationType.Q8_0}


def raw(rng, kind, n_out, n_in):
    """(rows as the file stores them, W (n_in, n_out) float32 as gguf dequantizes them)."""
    rows = quantize(rng.standard_normal((n_out, n_in)).astype(np.float32), KINDS[kind])
    return rows, dequantize(rows, KINDS[kind]).T


@pytest.mark.parametrize("kind", ["Q4_1", "Q8_0"])
@pytest.mark.parametrize("shape", [(7, 32), (300, 96), (1, 64)])
def test_one_row_times_the_codes_equals_the_float64_product(rng, kind, shape):
    n_out, n_in = shape
    rows, W = raw(rng, kind, n_out, n_in)
    packed = quantized.from_gguf(kind, rows)
    assert packed.shape == (n_in, n_out)
    x = rng.standard_normal((1, 1, n_in)).astype(np.float32)
    got = packed.times(x)
    want = x.astype(np.float64) @ W.astype(np.float64)  # (1, 1, n_out)
    assert got.shape == (1, 1, n_out) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("kind", ["Q4_1", "Q8_0"])
def test_the_codes_hold_gguf_s_weights(rng, kind):
    rows, W = raw(rng, kind, 5, 64)
    p = quantized.from_gguf(kind, rows)
    codes = p.codes  # Q8_0: (blocks, 32, out) int8; Q4_1: two codes a byte, t and t + 16
    if kind == "Q4_1":
        assert codes.dtype == np.uint8 and codes.shape == (2, 16, 5)
        codes = np.concatenate([codes & 0x0F, codes >> 4], axis=1)
    else:
        assert codes.dtype == np.int8 and codes.shape == (2, 32, 5)
    low = 0.0 if p.low is None else p.low[:, None, :].astype(np.float64)
    weights = p.scale[:, None, :].astype(np.float64) * codes + low  # (blocks, 32, out)
    np.testing.assert_allclose(weights.reshape(64, 5), W, rtol=1e-6, atol=1e-7)


def test_stacked_matrices_sit_side_by_side(rng):
    parts = [raw(rng, "Q4_1", n, 64) for n in (4, 2, 3)]
    stacked = quantized.stacked([quantized.from_gguf("Q4_1", rows) for rows, _ in parts])
    W = np.concatenate([w for _, w in parts], axis=1)  # (64, 9)
    x = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(stacked.times(x), x.astype(np.float64) @ W, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="one kind"):
        quantized.stacked([stacked, quantized.from_gguf("Q8_0", raw(rng, "Q8_0", 2, 64)[0])])


def test_product_takes_the_codes_for_one_row_of_the_very_matrix(rng):
    rows, W = raw(rng, "Q4_1", 6, 64)
    W = np.ascontiguousarray(W)
    table = quantized.packing([(W, quantized.from_gguf("Q4_1", rows))])
    wrong = quantized.packing([(W, quantized.from_gguf("Q4_1", raw(rng, "Q4_1", 6, 64)[0]))])
    x = rng.standard_normal((1, 64)).astype(np.float32)
    # a table whose codes hold other weights shows which path ran
    assert not np.allclose(quantized.product(x, W, wrong), x @ W, atol=1e-3)
    np.testing.assert_allclose(quantized.product(x, W, table), x @ W, rtol=1e-5, atol=1e-5)
    xs = rng.standard_normal((3, 64)).astype(np.float32)  # several rows: BLAS, W itself
    np.testing.assert_array_equal(quantized.product(xs, W, wrong), xs @ W)
    other = W.copy()  # another array (a replaced weight): never the stale codes
    np.testing.assert_array_equal(quantized.product(x, other, wrong), x @ other)
    x64 = x.astype(np.float64)  # float64 rows: W itself
    np.testing.assert_array_equal(quantized.product(x64, W, wrong), x64 @ W)


def test_bad_rows_are_refused_with_what_was_expected(rng):
    with pytest.raises(ValueError, match="expected a GGUF quantization in"):
        quantized.from_gguf("Q5_K", np.zeros((2, 20), np.uint8))
    with pytest.raises(ValueError, match=r"expected Q4_1 rows \(out, blocks·20\) uint8"):
        quantized.from_gguf("Q4_1", np.zeros((2, 21), np.uint8))
    p = quantized.from_gguf("Q8_0", raw(rng, "Q8_0", 2, 32)[0])
    with pytest.raises(ValueError, match="expected one row of 32 features"):
        p.times(np.zeros((2, 32), np.float32))
    with pytest.raises(ValueError, match="do not match"):
        quantized.packing([(np.zeros((64, 2), np.float32), p)])


def test_smollm2_multiplies_one_row_by_its_file_s_codes(rng, smollm2):
    blk = smollm2.blocks[0]
    matrices = (blk.W_QKV, blk.W_O, blk.W_gate, blk.W_up, blk.W_down)
    assert {id(W) for W in matrices} == set(blk.packed)  # every matrix of the block
    for W in matrices:
        x = rng.standard_normal((1, 1, W.shape[0])).astype(np.float32)
        want = x.astype(np.float64) @ W.astype(np.float64)
        np.testing.assert_allclose(blk.times(x, W), want, rtol=1e-4, atol=1e-5)
    h = rng.standard_normal(smollm2.d_model).astype(np.float32)
    want = h.astype(np.float64) @ smollm2.E_token.T.astype(np.float64)  # (vocab,)
    np.testing.assert_allclose(smollm2.logits(h), want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_weights_multiplied_by_their_codes_cannot_be_edited_in_place(smollm2):
    if not quantized.available():
        pytest.skip("numba is not installed: no weight is multiplied by its codes")
    blk = smollm2.blocks[0]
    with pytest.raises(ValueError, match="read-only"):
        blk.W_O[0, 0] = 0.0


@pytest.mark.parametrize("kind", ["Q4_1", "Q8_0"])
def test_scales_kept_as_float16_give_the_float32_scales_products_bit_for_bit(rng, kind):
    from qkv.models import quantized_jit

    if not quantized_jit.WIDENS_FLOAT16:
        pytest.skip("the compiled loops cannot widen float16 here: scales stay float32")
    rows, W = raw(rng, kind, 300, 96)
    halves = quantized.from_gguf(kind, rows, float16_scales=True)
    singles = quantized.from_gguf(kind, rows, float16_scales=False)
    assert halves.scale.dtype == np.float16 and singles.scale.dtype == np.float32
    assert (halves.low is None) == (kind == "Q8_0")
    if halves.low is not None:
        assert halves.low.dtype == np.float16 and halves.low.nbytes * 2 == singles.low.nbytes
    x = rng.standard_normal(96).astype(np.float32)
    np.testing.assert_array_equal(halves.times(x), singles.times(x))
    want = x.astype(np.float64) @ W.astype(np.float64)
    np.testing.assert_allclose(halves.times(x), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    default = quantized.from_gguf(kind, rows)  # the compiled loops' choice: float16 here
    assert default.scale.dtype == np.float16


# A numba target without F16C (NUMBA_CPU_NAME=generic, as portable caches use): the loops
# must compile for float32 scales alone, give the float64 product, and refuse float16 scales
# with a message (LLVM would otherwise abort the process on a library call numba cannot link).
GENERIC_TARGET = """
import numpy as np
from gguf.quants import quantize
import gguf
from qkv.models import quantized, quantized_jit
assert not quantized_jit.WIDENS_FLOAT16
rng = np.random.default_rng(0)
W = rng.standard_normal((40, 64)).astype(np.float32)
for kind in ("Q4_1", "Q8_0"):
    kind_type = getattr(gguf.GGMLQuantizationType, kind)
    rows = quantize(W, kind_type)
    p = quantized.from_gguf(kind, rows)
    assert p.scale.dtype == np.float32, p.scale.dtype
    x = rng.standard_normal(64).astype(np.float32)
    want = x.astype(np.float64) @ gguf.quants.dequantize(rows, kind_type).T
    assert np.allclose(p.times(x), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    try:
        quantized.from_gguf(kind, rows, float16_scales=True)
    except ValueError as e:
        assert "expected compiled loops that widen float16" in str(e)
    else:
        raise AssertionError("float16 scales accepted")
print("ok")
"""


@pytest.mark.slow
def test_a_numba_target_without_f16c_keeps_float32_scales_and_refuses_float16(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CPU_NAME": "generic", "NUMBA_CACHE_DIR": str(tmp_path)}
    env.pop("NUMBA_CPU_FEATURES", None)
    done = subprocess.run(
        [sys.executable, "-c", GENERIC_TARGET], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
