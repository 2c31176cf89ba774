"""MiniLM-L6 through qkv's attention against transformers' eager BERT (float64 fixture)."""

from __future__ import annotations

import numpy as np
import pytest

from qkv import Trace, models
from qkv.explain.walkthrough import render_plain, walkthrough


def test_tokenizer_gives_the_reference_ids(minilm, reference, sentences):
    for n, s in enumerate(sentences):
        ids, labels = minilm.encode(s)
        assert ids == reference[f"minilm/{n}/ids"].tolist()
    assert minilm.tokenize("The cat sat.") == ["[CLS]", "the", "cat", "sat", ".", "[SEP]"]


def test_float32_attention_and_hidden_states_match_reference(minilm, reference, sentences):
    for n, s in enumerate(sentences):
        run = minilm.trace(s)
        want = reference[f"minilm/{n}/probs"]  # (6 layers, 12 heads, L, L)
        assert run.weights.shape == want.shape
        assert np.abs(run.weights - want).max() <= 1e-5
        assert np.abs(run.hidden - reference[f"minilm/{n}/hidden"]).max() <= 1e-5


def test_fast_forward_equals_the_traced_forward(minilm, reference, sentences):
    long_text = " ".join(sentences) * 4  # past the reference's size: the blocked kernel runs
    assert 12 * len(minilm.tokenize(long_text)) ** 2 > 1 << 14
    for s in [*sentences, long_text]:
        fast = minilm.hidden_states(s)  # no trace kept
        np.testing.assert_allclose(fast, minilm.trace(s).hidden, atol=1e-5)
    np.testing.assert_allclose(
        minilm.hidden_states(sentences[0]), reference["minilm/0/hidden"], atol=1e-5
    )


def test_float64_matches_reference_to_rounding(minilm64, reference, sentences):
    for n, s in enumerate(sentences):
        run = minilm64.trace(s)
        assert np.abs(run.weights - reference[f"minilm/{n}/probs"]).max() <= 1e-12
        assert np.abs(run.hidden - reference[f"minilm/{n}/hidden"]).max() <= 1e-12


def test_padded_batch_equals_each_sentence_alone(minilm, sentences):
    short, long_ = sentences[0], sentences[1]
    together = minilm.trace_batch([short, long_])
    for run, s in zip(together, (short, long_), strict=False):
        alone = minilm.trace(s)
        assert run.tokens == alone.tokens
        np.testing.assert_allclose(run.weights, alone.weights, atol=2e-6)
        np.testing.assert_allclose(run.hidden, alone.hidden, atol=2e-5)


def test_layer_trace_has_every_step_and_feeds_the_walkthrough(minilm, reference, sentences):
    trace = models.layer_trace("minilm-l6", sentences[0], layer=2, model=minilm)
    assert isinstance(trace, Trace)
    assert trace.tokens == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
    assert trace.names == [
        "x",
        "q",
        "k",
        "v",
        "scores",
        "scaled",
        "tempered",
        "masked",
        "weights",
        "z",
        "head_out",
        "out",
    ]
    assert trace.settings["n_heads"] == 12 and trace.settings["d_k"] == 32
    np.testing.assert_allclose(trace["weights"], reference["minilm/0/probs"][2], atol=1e-5)
    # scores are q·kᵀ of the stored q and k (float64 einsum as the independent check)
    q, k = trace["q"].astype(np.float64), trace["k"].astype(np.float64)
    np.testing.assert_allclose(trace["scores"], np.einsum("hld,hsd->hls", q, k), atol=1e-4)
    text = render_plain(walkthrough(trace, 2, head=5))
    assert "q[cat]" in text and "(head 5)" in text
    back = Trace.from_json(trace.to_json())
    np.testing.assert_array_equal(back["weights"], trace["weights"])


def test_bad_input_is_refused_with_a_clear_message(minilm):
    with pytest.raises(ValueError, match="at least one non-space character"):
        minilm.trace("")
    with pytest.raises(ValueError, match="at least one non-space character"):
        minilm.trace("  \n ")
    with pytest.raises(ValueError, match=r"text is \d+ tokens long; .*512"):
        minilm.trace("word " * 600)
    with pytest.raises(TypeError, match="text must be a str, got int"):
        minilm.trace(42)
    with pytest.raises(ValueError, match=r"layer must be an integer in \[0, 6\).*got 6"):
        minilm.trace("hello", layers=[6])
    with pytest.raises(ValueError, match="non-empty list of strings"):
        minilm.trace_batch("a single string")
