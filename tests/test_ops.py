import math

import numpy as np
import pytest

from qkv import checks, steps


def test_softmax_refresher_numbers():
    w = steps.softmax(np.array([2.0, 1.0, 0.0]))
    e = np.exp([2.0, 1.0, 0.0])
    assert np.allclose(w, e / e.sum())
    assert np.round(w, 2).tolist() == [0.67, 0.24, 0.09]


def test_softmax_is_stable_for_huge_scores():
    w = steps.softmax(np.array([1000.0, 999.0]))
    assert np.allclose(w, [1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))])


def test_softmax_fully_masked_row_is_zero_not_nan():
    masked = np.array([[-np.inf, -np.inf], [0.0, -np.inf]])
    mask = np.array([[False, False], [True, False]])
    w = steps.softmax(masked, mask)
    assert w.tolist() == [[0.0, 0.0], [1.0, 0.0]]


def test_softmax_runs_in_float32_for_half_inputs():
    w = steps.softmax(np.array([2.0, 1.0, 0.0], dtype=np.float16))
    assert w.dtype == np.float32


def test_split_merge_heads_round_trip_and_layout():
    y = np.arange(2 * 3 * 6).reshape(2, 3, 6)  # (B, L, heads·d) with heads=2, d=3
    h = steps.split_heads(y, 2)
    assert h.shape == (2, 2, 3, 3)
    assert np.array_equal(h[:, 1], y[..., 3:])  # head 1 is the second block of columns
    assert np.array_equal(steps.merge_heads(h), y)


def test_entropy_of_uniform_and_one_hot():
    assert np.isclose(steps.entropy(np.full(4, 0.25)), math.log(4))
    assert steps.entropy(np.array([1.0, 0.0, 0.0])) == 0.0


def test_as_floating_promotes_integers_and_refuses_complex():
    assert checks.as_floating(np.array([1, 2])).dtype == np.float64
    with pytest.raises(TypeError, match="real-valued"):
        checks.as_floating(np.array([1j]))


def test_softmax_of_a_row_without_a_finite_max_is_nan():
    # +inf (an overflow: which key wins is lost), NaN, or every visible score −inf: no defined
    # softmax, so the row is NaN; a −inf beside finite scores just gets weight 0.
    w = steps.softmax(
        np.array(
            [
                [np.inf, 1.0, np.inf],
                [np.inf, -np.inf, 3.0],
                [np.nan, 1.0, 0.0],
                [-np.inf, -np.inf, -np.inf],
                [-np.inf, 0.0, 0.0],
            ]
        )
    )
    assert np.isnan(w[:4]).all()
    assert w[4].tolist() == [0.0, 0.5, 0.5]
    dead = np.zeros((1, 3), bool)  # no key to see: 0, decided from the mask
    assert steps.softmax(np.full((1, 3), -np.inf), dead).tolist() == [[0.0, 0.0, 0.0]]


def test_temperature_too_small_for_the_float_range_is_refused():
    import qkv

    q, k = np.array([[1.0, 2.0]]), np.eye(2)
    with pytest.raises(ValueError, match=r"temperature 1e-310 is too small.*overflows float64"):
        qkv.attention_weights(q, k, temperature=1e-310)
    w = qkv.attention_weights(q, k, temperature=1e-300)  # still representable: the argmax
    assert w.tolist() == [[0.0, 1.0]]
