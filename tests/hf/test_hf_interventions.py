"""qkv.hf.intervene and compare: each edit equals a model changed by hand and run by eager
attention (tiny Llama, float64), and the report's numbers are what they claim."""

from __future__ import annotations

import pytest
from tiny import build, padded_batch, softmax_in_input_dtype

import qkv.hf  # noqa: E402

torch = pytest.importorskip("torch")

LAYER, HEAD, D_HEAD = 1, 2, 8  # tiny Llama: 4 heads of 8 on d_model 32, 2 K/V heads


def eager_with(change, **kw):
    model = build("llama", attn="eager", dtype=torch.float64, **kw)
    with torch.no_grad():
        change(model.model.layers[LAYER].self_attn)
    return model


def logits(model, batch, **kwargs):
    with torch.no_grad(), softmax_in_input_dtype():
        return model(**batch, **kwargs).logits


def edited(spec, batch, **kw):
    model = build("llama", attn="qkv", dtype=torch.float64, **kw)
    with torch.no_grad(), qkv.hf.intervene(model, spec):
        return model(**batch).logits


ROWS = slice(HEAD * D_HEAD, (HEAD + 1) * D_HEAD)  # head 2's rows of q_proj, columns of o_proj


def test_pinning_a_head_to_uniform_equals_zeroing_its_queries():
    # q = 0 gives scores 0, so softmax spreads evenly over the keys the mask allows
    batch = padded_batch(left=True)
    want = logits(eager_with(lambda a: a.q_proj.weight[ROWS].zero_()), batch)
    got = edited({f"{LAYER}.{HEAD}": {"pin": "uniform"}}, batch)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(got[real], want[real], rtol=0, atol=1e-10)
    plain = logits(build("llama", attn="eager", dtype=torch.float64), batch)
    assert (got[real] - plain[real]).abs().max() > 1e-3  # the edit mattered


def test_tau_on_one_head_equals_scaling_its_queries():
    batch = padded_batch(left=True)
    want = logits(eager_with(lambda a: a.q_proj.weight[ROWS].mul_(1 / 0.25)), batch)
    got = edited({(LAYER, HEAD): {"tau": 0.25}}, batch)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(got[real], want[real], rtol=0, atol=1e-10)


def test_zero_ablation_equals_zeroing_the_heads_output_columns():
    batch = padded_batch(left=True)
    want = logits(eager_with(lambda a: a.o_proj.weight[:, ROWS].zero_()), batch)
    got = edited({f"{LAYER}.{HEAD}": {"ablate": "zero"}}, batch)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(got[real], want[real], rtol=0, atol=1e-10)


def test_mean_ablation_over_a_batch_of_one_repeated_sequence_changes_nothing():
    batch = padded_batch(left=True)
    same = {k: v[:1].repeat(2, 1) for k, v in batch.items()}
    plain = logits(build("llama", attn="qkv", dtype=torch.float64), same)
    torch.testing.assert_close(
        edited({f"{LAYER}.{HEAD}": {"ablate": "mean"}}, same), plain, rtol=0, atol=1e-12
    )
    other = edited({f"{LAYER}.{HEAD}": {"ablate": "mean"}}, batch)
    assert (
        other[0] - logits(build("llama", attn="qkv", dtype=torch.float64), batch)[0]
    ).abs().max() > 1e-6


def test_knocking_out_a_key_in_a_one_layer_model_equals_a_padding_mask_there():
    batch = {k: v[:1] for k, v in padded_batch().items()}
    hidden = dict(num_hidden_layers=1)
    model = build("llama", attn="qkv", dtype=torch.float64, config=hidden)
    with torch.no_grad(), qkv.hf.intervene(model, {"0": {"knockout": 2}}):
        got = model(**batch).logits
    masked = dict(batch, attention_mask=batch["attention_mask"].clone())
    masked["attention_mask"][0, 2] = 0
    want = logits(build("llama", attn="eager", dtype=torch.float64, config=hidden), masked)
    keep = [0, 1, 3, 4, 5, 6]  # query 2 itself is only hidden from the others
    torch.testing.assert_close(got[0, keep], want[0, keep], rtol=0, atol=1e-10)


def test_compare_reports_top_k_and_kl():
    batch = padded_batch(left=True)
    model = build("llama", attn="qkv", dtype=torch.float64)
    report = qkv.hf.compare(
        model, batch, {f"{LAYER}.{HEAD}": {"ablate": "zero"}}, top_k=3, sequence=1
    )
    plain = torch.softmax(logits(model, batch)[1, -1], -1)
    top = torch.topk(plain, 3)
    assert [t for t, _ in report.before] == [str(i) for i in top.indices.tolist()]
    assert [p for _, p in report.before] == pytest.approx(top.values.tolist(), rel=1e-12)
    after = torch.softmax(edited({f"{LAYER}.{HEAD}": {"ablate": "zero"}}, batch)[1, -1], -1)
    kl = float(torch.sum(plain * (plain.log() - after.log())))
    assert report.kl == pytest.approx(kl, rel=1e-9) and report.kl > 0
    assert report.edits == [f"layer {LAYER} head {HEAD}: zero-ablated"]
    same = qkv.hf.compare(model, batch, {"0": {"tau": 1.0}})
    assert same.kl == pytest.approx(0.0, abs=1e-12) and same.before == same.after


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"x.1": {"tau": 2}}, "'LAYER' or 'LAYER.HEAD'"),
        ({"5.0": {"tau": 2}}, "layer must be in [0, 2)"),
        ({"1.9": {"ablate": "zero"}}, "head must be in [0, 4)"),
        ({"1.0": {"tau": 0}}, "temperature must be a finite number > 0, got 0"),
        ({"1.0": {"ablate": "half"}}, "ablate must be 'zero' or 'mean'"),
        ({"1.0": {"scale": 2}}, "with keys from"),
    ],
)
def test_bad_edits_are_named(spec, message):
    model = build("llama", attn="qkv")
    with pytest.raises(ValueError) as e:
        with qkv.hf.intervene(model, spec):
            model(**padded_batch())
    assert message in str(e.value)
