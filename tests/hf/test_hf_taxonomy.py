"""Head taxonomy: the four scores on hand-made weights, a model through qkv.hf against eager's
attentions, and the induction heads SmolLM2 is known to have."""

from __future__ import annotations

import numpy as np
import pytest
from tiny import build

import qkv.hf  # noqa: E402,F401
from qkv.hf import taxonomy

torch = pytest.importorskip("torch")

T = 5


def pattern(kind: str) -> np.ndarray:
    """(2T, 2T) weights of a head that does exactly one thing (causal rows)."""
    w = np.zeros((2 * T, 2 * T))
    for i in range(2 * T):
        j = {
            "previous": max(i - 1, 0),
            "first": 0,
            "duplicate": i - T if i >= T else i,
            "induction": i - T + 1 if i >= T else i,
        }[kind]
        w[i, j] = 1.0
    return w


def test_each_pure_head_scores_one_on_its_own_kind_by_hand():
    w = np.stack([pattern(k) for k in taxonomy.KINDS])[None, None]  # (1, 1, 4, 2T, 2T)
    s = taxonomy.scores(w, T)
    got = np.stack([getattr(s, k)[0] for k in taxonomy.KINDS])  # (kind, head)
    np.testing.assert_array_equal(np.diag(got), 1.0)
    # the previous-token head also hits "first" at query 1 (its previous token is 0): 1 of 9
    assert got[1, 0] == pytest.approx(1 / (2 * T - 1))
    # an induction head at t = T-1 would look past the end: not counted, so exactly 1
    assert s.top("induction", 1) == [(0, 3, 1.0)]


def test_uniform_causal_heads_score_by_counting():
    w = np.tril(np.ones((2 * T, 2 * T)))
    w /= w.sum(-1, keepdims=True)  # w[i, j] = 1/(i+1)
    s = taxonomy.scores(w[None, None, None], T)
    i = np.arange(1, T)
    assert s.previous[0, 0] == pytest.approx(np.mean(1 / (i + 1)))
    assert s.first[0, 0] == pytest.approx(np.mean(1 / (np.arange(1, 2 * T) + 1)))


def test_a_tiny_model_through_qkv_scores_like_eager_attentions():
    model = build("llama", attn="qkv", dtype=torch.float64)
    got = taxonomy.measure(model, half=6, sequences=3, seed=4)
    ids = taxonomy.repeated_random_tokens(3, 6, low=3, high=97, rng=np.random.default_rng(4))
    with torch.no_grad():
        eager = build("llama", attn="eager", dtype=torch.float64)(
            input_ids=torch.as_tensor(ids), output_attentions=True
        ).attentions
    want = taxonomy.scores(torch.stack(eager, dim=1).numpy(), 6)
    for kind in taxonomy.KINDS:
        np.testing.assert_allclose(getattr(got, kind), getattr(want, kind), rtol=0, atol=1e-6)


def test_bad_shapes_and_kinds_are_named():
    with pytest.raises(ValueError, match=r"\(B, n_layers, n_heads, 2T, 2T\) with T = 5"):
        taxonomy.scores(np.zeros((1, 1, 1, 9, 9)), 5)
    s = taxonomy.scores(np.zeros((1, 1, 1, 10, 10)), 5)
    with pytest.raises(ValueError, match="kind must be one of"):
        s.top("copying")


@pytest.mark.slow
def test_smollm2_has_induction_and_previous_token_heads(smollm2):
    s = taxonomy.measure(smollm2)
    # a model trained on text copies repeated spans: some head puts most weight on the token
    # after the earlier copy, far above what chance (about 1/(2T) per key) would give
    assert s.top("induction", 1)[0][2] > 0.5 and s.top("previous", 1)[0][2] > 0.5
    assert s.induction.shape == (smollm2.n_layers, smollm2.n_heads)
