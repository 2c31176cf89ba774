"""qkv.hf.trace keeps lazy traces: on tiny random transformers models (Llama, Mistral's sliding
window, Gemma 2's soft-capping, GPT-OSS's sinks) with a left-padded batch, every step of every
head equals the eager steps on the same q, k, v and the mask built by hand, bit for bit; each
sequence's trace is a view of its call's arrays; the bundled SmolLM2's lazy weights at 256
tokens equal transformers' eager ``output_attentions``."""

from __future__ import annotations

import numpy as np
import pytest
from tiny import build, padded_batch

import qkv.hf
from qkv import attention
from qkv.models.result import held_arrays
from qkv.tiles import held_bytes

torch = pytest.importorskip("torch")

# architecture -> (its sliding window on the layers that have one, layers with it)
MODELS = {
    "llama": (None, ()),
    "mistral": (3, (0, 1)),
    "gemma2": (3, (0,)),  # Gemma 2 alternates sliding and full layers, sliding first
    "gpt_oss": (3, (0,)),
}


def by_hand(pad: np.ndarray, window) -> np.ndarray:
    """(B, 1, L, L) mask: real keys (pad True), causal, inside the window."""
    L = pad.shape[1]
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    near = True if window is None else i - j < window
    return pad[:, None, None, :] & (j <= i) & near


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    nan = a.dtype.kind == "f"
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=nan)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_step_of_a_traced_model_equals_the_eager_steps_bit_for_bit(name):
    window, sliding = MODELS[name]
    batch = padded_batch(left=True)
    model = build(name, attn="qkv", dtype=torch.float64)
    with torch.no_grad(), qkv.hf.trace(model) as run:
        model(**batch)
    pad = batch["attention_mask"].numpy().astype(bool)
    for i, lazy in run.calls[0].items():
        s = lazy.source
        mask = by_hand(pad, window if i in sliding else None)
        options = dict(scale=s.scale, softcap=s.softcap, sinks=s.sinks)
        _, eager = attention(s.q, s.k, s.v, mask=mask, return_trace=True, **options)
        assert lazy.settings.get("window") == (window if i in sliding else None)
        assert same(np.broadcast_to(lazy.settings["mask"], mask.shape), mask)
        for step in ("scores", "capped", "masked", "weights", "sink", "z"):
            if step in eager:
                assert same(lazy[step], eager[step]), (i, step)
        for b in range(2):  # each sequence with its padding cut off, against eager on it alone
            keep = np.flatnonzero(pad[b])
            seq = run.batch[b].layer(i)
            cut = [a[b][:, keep] for a in (s.q, s.k, s.v)]
            _, alone = attention(
                *cut, mask=mask[b][:, keep][..., keep], return_trace=True, **options
            )
            for h in range(s.H):
                for step in ("masked", "weights", "z"):
                    assert same(seq.head(h)[step], alone.head(h)[step]), (i, b, h, step)


def test_a_sequences_trace_is_a_view_of_its_calls_arrays():
    batch = padded_batch(left=True)
    model = build("llama", attn="qkv")
    with torch.no_grad(), qkv.hf.trace(model) as run:
        model(**batch)
    calls = [a for t in run.calls[0].values() for a in held_arrays(t)]
    sequences = [a for seq in run.batch for t in seq.layers.values() for a in held_arrays(t)]
    assert held_bytes(calls + sequences) == held_bytes(calls)  # no step kept twice
    # x, q, k, v, out per layer: 2 layers × 2 sequences × 7 positions × (32 + 4·8 + 2·2·8 + 32)
    # float32, and one (2, 1, 1, 7) padding mask both layers share: the mask as a rule
    assert held_bytes(calls) == 2 * 2 * 7 * (32 + 32 + 32 + 32) * 4 + 2 * 7
    assert run.layer(0).nbytes < held_bytes(held_arrays(run.calls[0][0]))


@pytest.mark.slow
def test_smollm2_lazy_weights_at_256_tokens_equal_transformers_eager(smollm2):
    from qkv.hf import bundled

    words = "the cat sat on a mat and then it ran to see what was in the big red box".split()
    run = smollm2.trace("The" + "".join(" " + words[i % len(words)] for i in range(255)))
    assert len(run.tokens) == 256
    eager = bundled.from_own(smollm2, attn="eager")
    with torch.no_grad():
        want = eager(torch.tensor([run.ids]), output_attentions=True).attentions
    for i in (0, 11, 29):
        for h in (0, 4, 8):
            got = run.layer(i).head(h)["weights"]
            np.testing.assert_allclose(got, want[i][0, h].numpy(), rtol=0, atol=2e-4)
