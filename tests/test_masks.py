import warnings

import numpy as np
import pytest

from qkv import masks


def test_causal_square_is_lower_triangle():
    m = masks.causal(4)
    assert m.dtype == bool
    assert np.array_equal(m, np.tril(np.ones((4, 4), bool)))
    assert np.array_equal(masks.causal(4, 4, "top-left"), m)


def test_causal_bottom_right_when_fewer_queries():
    # L = 2 queries are the last two of S = 5 positions: query 0 is position 3.
    m = masks.causal(2, 5)
    assert m.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_causal_top_left_when_fewer_queries():
    m = masks.causal(2, 5, align="top-left")
    assert m.tolist() == [[True, False, False, False, False], [True, True, False, False, False]]


def test_causal_bottom_right_with_more_queries_leaves_empty_rows():
    m = masks.causal(3, 2)
    assert m.tolist() == [[False, False], [True, False], [True, True]]


def test_padding_mask_shape_and_values():
    m = masks.padding([3, 1], 4)
    assert m.shape == (2, 1, 4)
    assert m[:, 0].tolist() == [[True, True, True, False], [True, False, False, False]]


def test_combine_is_and_and_skips_none():
    a = masks.causal(3)
    b = np.array([True, False, True])
    c = masks.combine(a, None, b)
    assert np.array_equal(c, a & b)
    assert masks.combine() is None


@pytest.mark.parametrize("bad", [-1, 2.5, True, "3"])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="L must be a non-negative integer"):
        masks.causal(bad, 3)


def test_bad_alignment_names_choices():
    with pytest.raises(ValueError, match="bottom-right"):
        masks.causal(3, 3, align="lower")


def test_padding_rejects_out_of_range_and_float_lengths():
    with pytest.raises(ValueError, match=r"\[0, S=4\]"):
        masks.padding([5], 4)
    with pytest.raises(TypeError, match="integers"):
        masks.padding([1.5], 4)


def test_combine_rejects_float_masks():
    with pytest.raises(TypeError, match="boolean"):
        masks.combine(np.ones((2, 2)))


def test_an_alibi_slope_whose_bias_overflows_is_refused_without_a_warning():
    biggest = np.finfo(np.float64).max / 5  # the farthest key of 6 positions is 5 away
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail here
        with pytest.raises(ValueError, match=r"ALiBi slope 1e\+308 × the largest distance 5"):
            masks.alibi(6, 6, 1e308)
        with pytest.raises(ValueError, match="largest distance 7"):
            masks.alibi(2, 8, 1e308)  # bottom-right: query 1 sits at position 7, key 0 is 7 away
        with pytest.raises(ValueError, match="largest distance 7"):
            masks.alibi(8, 2, 1e308)  # query 0 sits at position -6, key 1 is 7 away
        assert masks.alibi(6, 6, biggest)[5, 0] == -biggest * 5  # the largest slope still fits
    assert masks.alibi(1, 1, 1e308).tolist() == [[0.0]]  # no distance: nothing to overflow
