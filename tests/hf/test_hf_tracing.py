"""qkv.hf.trace: one qkv.Trace per layer, the run object the bundled models give; its weights
equal eager's output_attentions; the bundled models through transformers equal qkv's own."""

from __future__ import annotations

import numpy as np
import pytest
from tiny import build, padded_batch, softmax_in_input_dtype

import qkv.hf  # noqa: E402
from qkv.models import ModelTrace

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["gemma2", "gpt_oss", "bert"])
def test_trace_weights_equal_eager_output_attentions(name):
    batch = padded_batch(left=name != "bert")
    model = build(name, attn="qkv", dtype=torch.float64)
    with torch.no_grad(), qkv.hf.trace(model) as run:
        model(**batch)
    with torch.no_grad(), softmax_in_input_dtype():
        eager = build(name, attn="eager", dtype=torch.float64)(**batch, output_attentions=True)
    assert isinstance(run, ModelTrace) and len(run.batch) == 2
    assert sorted(run.layers) == list(range(len(eager.attentions)))
    mask = batch["attention_mask"].numpy().astype(bool)
    for b, seq in enumerate(run.batch):
        keep = np.flatnonzero(mask[b])
        assert seq.ids == batch["input_ids"][b, keep].tolist()
        for i, want in enumerate(eager.attentions):
            want = want[b].numpy()[:, keep][..., keep]  # (H, n, n)
            np.testing.assert_allclose(seq.layer(i)["weights"], want, rtol=0, atol=1e-12)
            assert seq.layer(i).tokens == seq.tokens == [str(t) for t in seq.ids]
    steps = run.layer(0).names
    assert {"x", "q", "k", "v", "scores", "weights", "z", "out"} <= set(steps)
    assert ("capped" in steps) == (name == "gemma2") and ("sink" in steps) == (name == "gpt_oss")


def test_generate_records_one_call_per_step():
    model = build("llama", attn="qkv")
    batch = padded_batch(left=True)
    model.generation_config.pad_token_id = 0
    with torch.no_grad(), qkv.hf.trace(model) as run:
        model.generate(**batch, max_new_tokens=3, do_sample=False)
    assert len(run.calls) == 3
    assert [c[0].settings["L"] for c in run.calls] == [7, 1, 1]
    assert [c[1].settings["S"] for c in run.calls] == [7, 8, 9]


def test_tracing_needs_the_qkv_implementation():
    with pytest.raises(ValueError, match="attn_implementation='qkv'"):
        with qkv.hf.trace(build("llama", attn="eager")):
            pass


def _batch(own, texts):
    enc = [own.encode(t)[0] for t in texts]
    n = max(map(len, enc))
    ids = torch.full((len(enc), n), own.pad_id)
    mask = torch.zeros(len(enc), n, dtype=torch.long)
    for b, row in enumerate(enc):
        ids[b, : len(row)], mask[b, : len(row)] = torch.tensor(row), 1
    return {"input_ids": ids, "attention_mask": mask}


TEXTS = ["The cat sat on the mat because it was tired.", "Attention is all you need"]


@pytest.mark.parametrize(
    "fixture, atol",
    [
        ("minilm", (1e-5, 1e-5)),
        # transformers' Llama computes RoPE angles in float32 (qkv in float64): 1e-6 apart per angle
        pytest.param("smollm2", (2e-4, 1e-5), marks=pytest.mark.slow),
    ],
)
def test_bundled_models_through_transformers_equal_qkvs_own(fixture, atol, request):
    from qkv.hf import bundled, loading

    own = request.getfixturevalue(fixture)
    model = bundled.from_own(own)
    batch = _batch(own, TEXTS)
    with torch.no_grad(), qkv.hf.trace(model, tokenizer=loading.BundledTokenizer(own)) as run:
        out = model(**batch, output_hidden_states=True)
    hidden = out.hidden_states[-1]
    for b, want in enumerate(own.trace_batch(TEXTS)):
        assert run.batch[b].tokens == want.tokens
        n = len(want.ids)
        np.testing.assert_allclose(hidden[b, :n].numpy(), want.hidden, rtol=0, atol=atol[0])
        for i in want.layers:
            np.testing.assert_allclose(
                run.batch[b].layer(i)["weights"], want.layer(i)["weights"], rtol=0, atol=atol[1]
            )
