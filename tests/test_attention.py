"""The engine against hand-computed values, the tutorials' worked example, and edge cases."""

import math

import numpy as np
import pytest

import qkv
from qkv import attention, attention_weights


def test_hand_computed_sqrt2_example():
    q = np.array([[0.0, math.sqrt(2)]])
    k = np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.array([[1.0, 0.0], [0.0, 1.0]])
    # scores = [0, √2]; scaled = scores/√2 = [0, 1]; weights = [1, e]/(1 + e)
    out = attention(q, k, v)
    expect = np.array([1.0, math.e]) / (1 + math.e)
    assert np.allclose(attention_weights(q, k)[0], expect, rtol=0, atol=1e-15)
    assert np.allclose(out[0], expect, rtol=0, atol=1e-15)


def test_two_token_worked_example_unscaled():
    q = np.eye(2)
    k = np.array([[0.0, 1.0], [1.0, 0.0]])
    v = np.array([[2.0, 0.0], [0.0, 3.0]])
    out, tr = attention(q, k, v, scale=1.0, return_trace=True)
    assert np.array_equal(tr.scores, [[0.0, 1.0], [1.0, 0.0]])
    assert np.round(tr.weights[0], 2).tolist() == [0.27, 0.73]
    assert np.round(out[0], 2).tolist() == [0.54, 2.19]


def test_three_by_five_by_seven_against_loops(rng):
    # L=3, S=5, d_k=7, d_v=11, computed with plain Python loops as an independent reference.
    q, k, v = rng.normal(size=(3, 7)), rng.normal(size=(5, 7)), rng.normal(size=(5, 11))
    out = attention(q, k, v, temperature=0.7)
    for i in range(3):
        s = [sum(q[i, t] * k[j, t] for t in range(7)) / math.sqrt(7) / 0.7 for j in range(5)]
        m = max(s)
        e = [math.exp(x - m) for x in s]
        w = [x / sum(e) for x in e]
        ref = [sum(w[j] * v[j, c] for j in range(5)) for c in range(11)]
        assert np.allclose(out[i], ref, rtol=0, atol=1e-13)


def test_trace_holds_every_step_with_settings(rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    out, tr = attention(q, k, v, causal=True, temperature=2.0, return_trace=True)
    assert tr.names == [
        "q",
        "k",
        "v",
        "scores",
        "scaled",
        "tempered",
        "masked",
        "weights",
        "z",
        "out",
    ]
    assert np.allclose(tr.scaled, tr.scores / 2.0)
    assert np.allclose(tr.tempered, tr.scaled / 2.0)
    assert tr.settings["causal"] == "bottom-right"
    assert tr.settings["scale"] == 0.5 and tr.settings["temperature"] == 2.0
    assert (tr.settings["L"], tr.settings["S"], tr.settings["d_k"], tr.settings["d_v"]) == (
        3,
        5,
        4,
        2,
    )
    # bottom-right: query 0 is position 2 of 5, so keys 3 and 4 are hidden.
    assert np.isneginf(tr.masked[0, 3:]).all() and np.isfinite(tr.masked[0, :3]).all()
    assert np.all(tr.weights[0, 3:] == 0)
    assert out is tr.out


def test_fully_masked_row_gives_zero_weights_and_output(rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = np.ones((3, 5), bool)
    mask[1] = False
    out, tr = attention(q, k, v, mask=mask, return_trace=True)
    assert np.all(tr.weights[1] == 0) and np.all(out[1] == 0)
    assert np.isfinite(out).all()


def test_nan_in_unmasked_input_propagates(rng):
    q, k, v = rng.normal(size=(2, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    q[0, 0] = np.nan
    mask = np.array([[True, True, False], [False, False, False]])
    out = attention(q, k, v, mask=mask)
    assert np.isnan(out[0]).all()  # an unmasked NaN shows
    assert np.all(out[1] == 0)  # the fully masked row is decided by the mask alone


def test_nan_in_masked_key_has_no_influence(rng):
    q, k, v = rng.normal(size=(2, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    k[2] = np.nan
    mask = np.array([True, True, False])
    out = attention(q, k, v, mask=mask)
    ref = attention(q, k[:2], v[:2])
    assert np.allclose(out, ref, rtol=0, atol=1e-15)


def test_empty_queries_and_empty_keys(rng):
    k, v = rng.normal(size=(5, 4)), rng.normal(size=(5, 3))
    out = attention(np.zeros((0, 4)), k, v)
    assert out.shape == (0, 3)
    out = attention(rng.normal(size=(2, 4)), np.zeros((0, 4)), np.zeros((0, 3)))
    assert out.shape == (2, 3) and np.all(out == 0)


def test_layouts_give_the_same_result(rng):
    q, k, v = rng.normal(size=(7, 5)), rng.normal(size=(9, 5)), rng.normal(size=(9, 3))
    ref = attention(q, k, v)
    assert np.array_equal(attention(np.asfortranarray(q), np.asfortranarray(k), v), ref)
    qt = np.ascontiguousarray(q.T).T  # a transposed view
    assert np.allclose(attention(qt, k, v), ref, rtol=0, atol=1e-15)
    big = rng.normal(size=(14, 10))
    big[::2, ::2] = q
    assert np.allclose(attention(big[::2, ::2], k, v), ref, rtol=0, atol=1e-15)  # strided
    row = rng.normal(size=(1, 5))
    b = np.broadcast_to(row, (7, 5))  # stride 0
    assert np.allclose(
        attention(b, k, v), attention(np.repeat(row, 7, 0), k, v), rtol=0, atol=1e-15
    )


def test_integer_inputs_are_computed_in_float64():
    out = attention(
        np.eye(2, dtype=int), np.array([[0, 1], [1, 0]]), np.array([[2, 0], [0, 3]]), scale=1.0
    )
    assert out.dtype == np.float64
    assert np.round(out[0], 2).tolist() == [0.54, 2.19]


def test_float32_stays_float32(rng):
    q = rng.normal(size=(3, 4)).astype(np.float32)
    assert attention(q, q, q).dtype == np.float32


def test_grouped_query_attention_equals_repeated_heads(rng):
    q = rng.normal(size=(2, 6, 5, 4))  # (B, H=6, L, d)
    k = rng.normal(size=(2, 3, 7, 4))  # (B, G=3, S, d)
    v = rng.normal(size=(2, 3, 7, 5))
    out = attention(q, k, v, causal=True)
    ref = attention(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1), causal=True)
    assert out.shape == (2, 6, 5, 5)
    assert np.allclose(out, ref, rtol=0, atol=1e-14)


# ---- errors name what was expected and what came ---------------------------------------------


def test_mismatched_d_k_names_both_shapes():
    with pytest.raises(ValueError, match=r"same last dimension d_k.*\(5, 7\).*\(5, 8\)"):
        attention(np.ones((5, 7)), np.ones((5, 8)), np.ones((5, 2)))


def test_mismatched_key_count_between_k_and_v():
    with pytest.raises(ValueError, match=r"number of keys S.*\(5, 4\).*\(6, 4\)"):
        attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((6, 4)))


def test_heads_must_divide():
    with pytest.raises(ValueError, match=r"multiple of k's heads"):
        attention(np.ones((4, 3, 2)), np.ones((3, 3, 2)), np.ones((3, 3, 2)))


def test_float_mask_is_refused():
    with pytest.raises(TypeError, match="mask must be boolean.*float64"):
        attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), mask=np.ones((2, 2)))


def test_wrongly_shaped_mask_is_refused():
    with pytest.raises(ValueError, match=r"mask must broadcast.*\(2, 3\).*\(3, 2\)"):
        attention(np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 2)), mask=np.ones((3, 2), bool))


@pytest.mark.parametrize("tau", [0.0, -1.0, math.inf, math.nan])
def test_bad_temperature_is_refused(tau):
    with pytest.raises(ValueError, match="temperature must be a finite number > 0, got"):
        attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), temperature=tau)


def test_bad_causal_value_is_refused():
    with pytest.raises(ValueError, match="causal must be"):
        attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), causal="lower")


def test_one_dimensional_input_is_refused():
    with pytest.raises(ValueError, match=r"q must have at least 2 dimensions.*\(3,\)"):
        attention(np.ones(3), np.ones((2, 3)), np.ones((2, 3)))


def test_public_names():
    assert qkv.attention is attention and callable(qkv.attention_weights)
