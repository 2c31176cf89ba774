"""Each scene's story, checked against the engine's numbers."""

import math

import numpy as np
import pytest

from qkv import presets


def test_names_and_default():
    assert presets.names()[0] == presets.DEFAULT == "cat-sat"
    assert {"cat-sat", "agreement", "bank", "two-token", "two-heads"} <= set(presets.names())
    for name in presets.names():
        s = presets.load(name)
        assert s.lesson and s.title and len(s.tokens) == s.x.shape[0]


def test_unknown_preset_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown preset 'nope'.*cat-sat"):
        presets.load("nope")


def test_cat_sat_is_three_dimensional_and_sat_attends_to_itself_then_mat():
    s = presets.load("cat-sat")
    assert s.tokens == ("the", "cat", "sat", "on", "the", "mat")
    assert s.x.shape == (6, 3) and s.W_Q.shape == s.W_K.shape == s.W_V.shape == (3, 3)
    assert s.tokens[s.select] == "sat"
    w = s.trace().weights[s.select]
    order = np.argsort(-w)
    assert [s.tokens[j] for j in order[:2]] == ["sat", "mat"]
    assert math.isclose(w.sum(), 1.0)


def test_agreement_blank_matches_he_and_he_delivers_something_else():
    s = presets.load("agreement")
    assert len(s.tokens) == 8 and s.tokens[s.select] == "___"
    tr = s.trace()
    he = s.tokens.index("he")
    w = tr.weights[s.select]
    assert int(np.argmax(w)) == he and w[he] > 0.5
    k, v = tr.k[he], tr.v[he]
    # K and V are decoupled: what 'he' is matched on differs from what it delivers.
    assert k.tolist() == [2.0, 1.0] and v.tolist() == [1.0, -1.0, 1.0]
    assert not np.allclose(s.W_K @ np.eye(2), s.W_V[:, :2])
    # the blank's output carries the "-s" feature (value dimension 0) that only 'he' has
    assert tr.out[s.select, 0] > 0.5 and np.all(tr.v[np.arange(8) != he, 0] == 0)


def test_bank_query_matches_deposit_key():
    s = presets.load("bank")
    tr = s.trace()
    assert s.tokens[s.select] == "bank"
    w = tr.weights[s.select]
    assert s.tokens[int(np.argmax(w))] == "deposit"
    scores = tr.scores[s.select]
    assert s.tokens[int(np.argmax(scores))] == "deposit"


def test_two_token_example_matches_the_tutorial():
    s = presets.load("two-token")
    assert np.array_equal(s.x, np.eye(2))
    tr = s.trace()
    assert tr.settings["scale"] == 1.0  # unscaled by default
    assert np.array_equal(tr.scores, [[0.0, 1.0], [1.0, 0.0]])
    assert np.array_equal(tr.v, [[2.0, 0.0], [0.0, 3.0]])
    assert np.round(tr.out[0], 2).tolist() == [0.54, 2.19]


def test_two_heads_attend_differently():
    s = presets.load("two-heads")
    assert s.x.shape[1] == 8 and s.n_heads == 2
    tr = s.trace()
    w = tr.weights[:, s.select]  # (heads, S)
    top = [s.tokens[int(np.argmax(w[h]))] for h in range(2)]
    assert top == ["cat", "mat"]
    assert np.abs(tr.weights[0] - tr.weights[1]).max() > 0.3


def test_scene_options_reach_the_engine():
    s = presets.load("cat-sat")
    hot = s.trace(temperature=0.1).weights[s.select]
    cold = s.trace(temperature=10).weights[s.select]
    assert hot.max() > 0.9 and cold.max() - cold.min() < 0.05
    causal = s.trace(causal=True)
    assert np.all(causal.weights[s.select, s.select + 1 :] == 0)
    unscaled = s.trace(scaled=False)
    assert unscaled.settings["scale"] == 1.0
    assert s.index("mat") == 5 and s.index(-1) == 5
    with pytest.raises(ValueError, match=r"token 'dog' is not in scene 'cat-sat'"):
        s.index("dog")
