"""SmolLM2-135M through qkv's attention against transformers' Llama on the same GGUF weights."""

from __future__ import annotations

import json

import numpy as np
import pytest

from qkv import models
from qkv.models import rope
from qkv.models.smollm2 import before_rotation


def test_tokenizer_gives_the_reference_ids(smollm2, reference, sentences):
    for n, s in enumerate(sentences):
        assert smollm2.encode(s)[0] == reference[f"smollm2/{n}/ids"].tolist()
    assert smollm2.tokenize("in 2024") == ["in", " ", "2", "0", "2", "4"]  # digits one by one


def test_float32_attention_and_hidden_states_match_reference(smollm2, reference, sentences):
    for n, s in enumerate(sentences):
        run = smollm2.trace(s)
        want = reference[f"smollm2/{n}/probs"]  # (30 layers, 9 heads, L, L)
        assert run.weights.shape == want.shape
        assert np.abs(run.weights - want).max() <= 1e-4
        hidden = reference[f"smollm2/{n}/hidden"]  # entries up to ~37 in size
        assert np.abs(run.hidden - hidden).max() <= 1e-5 * np.abs(hidden).max() * 10


@pytest.mark.slow
def test_float64_matches_reference_to_rounding(smollm2_64, reference, sentences):
    for n, s in enumerate(sentences):
        run = smollm2_64.trace(s)
        assert np.abs(run.weights - reference[f"smollm2/{n}/probs"]).max() <= 1e-11
        assert np.abs(run.hidden - reference[f"smollm2/{n}/hidden"]).max() <= 1e-10


def test_trace_holds_q_k_before_and_after_rope(smollm2, sentences):
    t = smollm2.layer_trace(sentences[0], layer=4)
    assert t.names[:5] == ["x", "q", "k", "v", "rope"]
    H, G, L = 9, 3, len(t.tokens)
    q0, k0 = before_rotation(t)
    assert q0.shape == (H, L, 64) and k0.shape == (G, L, 64) and t["k"].shape == (G, L, 64)
    positions = np.arange(L)
    np.testing.assert_allclose(t["q"], rope.rotate(q0, positions, base=100000.0), atol=1e-5)
    np.testing.assert_allclose(t["k"], rope.rotate(k0, positions, base=100000.0), atol=1e-5)
    # scores use the rotated vectors; query head h reads K/V head h // 3 (grouped-query)
    q, k = t["q"].astype(np.float64), t["k"].astype(np.float64)
    want = np.einsum("hld,hsd->hls", q, np.repeat(k, 3, axis=0))
    np.testing.assert_allclose(t["scores"], want, rtol=1e-5, atol=1e-3)
    w = t["weights"]
    assert np.all(w[:, np.triu_indices(L, 1)[0], np.triu_indices(L, 1)[1]] == 0)  # causal
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    assert json.loads(t.to_json())["settings"]["rope_base"] == 100000.0


def test_padded_batch_equals_each_sentence_alone(smollm2, sentences):
    short, long_ = sentences[0], sentences[1]
    together = smollm2.trace_batch([short, long_])
    for run, s in zip(together, (short, long_), strict=False):
        alone = smollm2.trace(s)
        np.testing.assert_allclose(run.weights, alone.weights, atol=1e-5)
        np.testing.assert_allclose(run.hidden, alone.hidden, atol=1e-3)


def test_greedy_generation_equals_the_reference_continuation(smollm2, reference):
    prompt = str(reference["smollm2/greedy/prompt"])
    want = reference["smollm2/greedy/new_ids"].tolist()
    steps = list(smollm2.generate(prompt, len(want), weights=True))
    assert [g.id for g in steps] == want
    assert "".join(g.text for g in steps).startswith(" Paris")
    n_prompt = len(reference["smollm2/greedy/prompt_ids"])
    for t, g in enumerate(steps):  # each token's attention rows: (layers, heads, S) over S keys
        assert g.weights.shape == (30, 9, n_prompt + t)
        np.testing.assert_allclose(g.weights.sum(-1), 1.0, atol=1e-5)
    # the first token's rows are the prompt's last query rows of a plain trace
    run = smollm2.trace(prompt)
    np.testing.assert_allclose(steps[0].weights, run.weights[:, :, -1, :], atol=1e-5)


def test_traced_generation_reads_only_each_heads_last_row(smollm2, monkeypatch):
    """A prompt whose whole weights step would pass the lazy traces' budget (a long prompt, here
    a small budget): each token still gets its layers' last query rows."""
    from qkv import lazy

    prompt = "The quick brown fox jumps over the lazy dog near the river bank"
    want = smollm2.trace(prompt).weights[:, :, -1, :]  # (layers, heads, S), the plain trace
    monkeypatch.setattr(lazy, "BUDGET", 4096)  # bytes: less than one layer's (9, L, L) step
    first, second = smollm2.generate(prompt, 2, weights=True)
    np.testing.assert_allclose(first.weights, want, atol=1e-5)
    monkeypatch.undo()
    ids, _ = smollm2.encode(prompt)
    ids = np.asarray([ids + [first.id]])  # the second token's query: a pass without a cache
    _, traces = smollm2._forward(ids, np.array([ids.shape[1]]), keep=set(range(30)))
    then = np.stack([traces[i]["weights"][0, :, -1, :] for i in range(30)])
    np.testing.assert_allclose(second.weights, then, atol=1e-5)


@pytest.mark.slow
def test_fast_generation_gives_the_traced_paths_greedy_tokens(smollm2, reference):
    prompt = "Once upon a time, in a small village by the sea,"
    traced = list(smollm2.generate(prompt, 32, weights=True))
    fast = list(smollm2.generate(prompt, 32))
    assert len(traced) == 32 and [g.id for g in fast] == [g.id for g in traced]
    assert all(g.weights is None for g in fast)  # not computed unless asked for
    want = reference["smollm2/greedy/new_ids"].tolist()  # transformers' own continuation
    fast = list(smollm2.generate(str(reference["smollm2/greedy/prompt"]), len(want)))
    assert [g.id for g in fast] == want


def test_fast_forward_equals_the_traced_forward(smollm2, sentences):
    for s in sentences:
        np.testing.assert_allclose(smollm2.hidden_states(s), smollm2.trace(s).hidden, atol=1e-4)


@pytest.mark.slow
def test_cached_generation_equals_full_recomputation(smollm2):
    prompt = "Attention lets each token"
    cached = [g.id for g in smollm2.generate(prompt, 10)]
    ids = smollm2.encode(prompt)[0]
    for _ in range(10):  # no cache: rerun the whole sequence for every new token
        ids.append(int(np.argmax(smollm2.next_logits(ids))))
    assert cached == ids[-10:]


def test_sampling_is_reproducible_with_a_seed(smollm2):
    a = [g.id for g in smollm2.generate("Once upon a time", 6, temperature=0.9, top_k=40, seed=5)]
    b = [g.id for g in smollm2.generate("Once upon a time", 6, temperature=0.9, top_k=40, seed=5)]
    assert a == b


def test_chat_template_wraps_the_prompt(smollm2):
    ids, labels = smollm2.encode("<|im_start|>user\nHi<|im_end|>\n")
    assert ids[0] == 1 and labels[0] == "<|im_start|>"  # a special token, not split in pieces
    first = next(smollm2.generate("What is 2+2?", 4, chat=True, weights=True))
    assert first.weights.shape[-1] == len(
        smollm2.encode("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")[0]
    )


def test_bad_input_is_refused_with_a_clear_message(smollm2):
    with pytest.raises(ValueError, match="non-space"):
        next(smollm2.generate("", 3))
    with pytest.raises(ValueError, match="non-space"):
        smollm2.trace(" ")
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer, got 0"):
        next(smollm2.generate("hi", 0))
    with pytest.raises(
        ValueError, match=r"temperature must be a finite number ≥ 0 \(0 = greedy\), got -1.0"
    ):
        next(smollm2.generate("hi", 3, temperature=-1.0))
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        next(smollm2.generate("hi", 3, top_k=0))
    with pytest.raises(ValueError, match=r"context is 8192 tokens"):
        next(smollm2.generate("hello " * 9000, 3))
    with pytest.raises(ValueError, match=r"exceeds smollm2-135m's context of 8192"):
        next(smollm2.generate("hello " * 8190, 10))
    with pytest.raises(ValueError, match=r"context is 8192 tokens"):  # the only limit a trace has
        smollm2.trace("hello " * 9000)
    with pytest.raises(ValueError, match=r"model= is 'smollm2-135m' but name is 'minilm-l6'"):
        models.layer_trace("minilm-l6", "hi", layer=0, model=smollm2)
