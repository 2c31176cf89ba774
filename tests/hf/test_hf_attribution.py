"""qkv.hf.attribute, patching and lens against the models' own numbers and against shares
computed by hand from transformers' eager models with forward hooks (tiny random models of
every listed architecture; SmolLM2 marked slow)."""

from __future__ import annotations

import numpy as np
import pytest
from tiny import build, patched_by_hand, word_tokenizer

import qkv.hf  # noqa: E402

torch = pytest.importorskip("torch")

CLEAN = torch.tensor([[5, 17, 33, 5, 17, 40, 2]])
CORRUPTED = torch.tensor([[5, 17, 33, 9, 17, 40, 2]])  # position 3 differs
LISTED = ("llama", "qwen2", "mistral", "gemma", "gemma2", "gemma3", "phi3", "gpt2")


def own_logits(model, ids, *, position=-1):
    """The eager model's logits at ``position``, float64, before its final soft-cap (undone:
    c·atanh(logits / c))."""
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, position].double()
    cap = getattr(model.config, "final_logit_softcapping", None)
    return torch.atanh(logits / cap) * cap if cap else logits


def far_apart(logits):
    """(target, baseline): the likeliest and the least likely token, so LD is far from 0."""
    return int(logits.argmax()), int(logits.argmin())


@pytest.mark.parametrize("name", LISTED)
def test_the_shares_sum_to_the_models_own_logit_difference(name):
    eager, model = build(name, attn="eager"), build(name, attn="qkv")  # float32, same weights
    logits = own_logits(eager, CLEAN)
    t, b = far_apart(logits)
    want = float(logits[t] - logits[b])
    a = qkv.hf.attribute(model, CLEAN, t, baseline=b, by_key=2)
    assert abs(a.logit_diff - want) <= 1e-4 * abs(want)
    assert abs(a.total() - want) <= 1e-4 * abs(want)
    assert a.heads.shape == (2, 4) and a.mlp.shape == (2,)
    assert np.abs(a.heads).max() > 1e-3 and np.abs(a.mlp).max() > 1e-3  # not all zero
    for split in a.by_key:  # each head's per-key parts sum to its share
        assert split.parts.sum() == pytest.approx(split.value, rel=1e-4, abs=1e-5)
        assert split.weights.sum() == pytest.approx(1.0, abs=1e-5)


def test_one_logit_alone_sums_too():
    model = build("gpt2", attn="qkv")  # LayerNorm with a bias, biased projections
    logits = own_logits(build("gpt2", attn="eager"), CLEAN, position=4)
    t = int(logits.argmax())
    a = qkv.hf.attribute(model, CLEAN, t, position=4, by_key=0)
    assert a.baseline is None and a.position == 4
    assert a.total() == pytest.approx(float(logits[t]), rel=1e-4)
    assert abs(a.rest_parts["final norm bias"]) > 0 and a.by_key == []


def eager_parts(name, model, ids, t, b):
    """Each head's share computed by hand: o_proj's input at the last position sliced per head,
    times W_O's slice, through the final norm with the final residual's scale (float64)."""
    if name == "gpt2":
        blocks, norm = model.transformer.h, model.transformer.ln_f
        out_projs = [blk.attn.c_proj for blk in blocks]
        W_O = [p.weight.double() for p in out_projs]  # Conv1D: (H·d, D)
    else:
        blocks, norm = model.model.layers, model.model.norm
        out_projs = [blk.self_attn.o_proj for blk in blocks]
        W_O = [p.weight.double().T for p in out_projs]  # Linear stores (D, H·d)
    seen = {}
    hooks = [norm.register_forward_pre_hook(lambda m, a: seen.__setitem__("y", a[0][0, -1]))]
    for i, p in enumerate(out_projs):
        hooks.append(
            p.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(i, a[0][0, -1]))
        )
    with torch.no_grad():
        model(input_ids=ids)
    for h in hooks:
        h.remove()
    return _shares_by_hand(name, model, norm, W_O, seen, t, b)


@torch.no_grad()
def _shares_by_hand(name, model, norm, W_O, seen, t, b):
    y = seen["y"].double()
    W_U = model.lm_head.weight.double()
    du = W_U[t] - W_U[b]
    if name == "gpt2":  # LayerNorm: center, divide by the std of y, times weight
        scale = norm.weight.double() / torch.sqrt(((y - y.mean()) ** 2).mean() + norm.eps)
    else:
        scale = norm.weight.double() / torch.sqrt((y * y).mean() + norm.variance_epsilon)
    H = model.config.num_attention_heads
    d = W_O[0].shape[0] // H
    shares = np.zeros((len(W_O), H))
    for i in range(len(W_O)):
        z = seen[i].double()
        for h in range(H):
            part = z[h * d : (h + 1) * d] @ W_O[i][h * d : (h + 1) * d]  # (d,) @ (d, D)
            if name == "gpt2":
                part = part - part.mean()
            shares[i, h] = float((part * scale) @ du)
    return shares


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_each_heads_share_equals_one_computed_by_hand_with_hooks_on_the_eager_model(name):
    eager = build(name, attn="eager")
    t, b = far_apart(own_logits(eager, CLEAN))
    a = qkv.hf.attribute(build(name, attn="qkv"), CLEAN, t, baseline=b, by_key=0)
    np.testing.assert_allclose(a.heads, eager_parts(name, eager, CLEAN, t, b), rtol=1e-5, atol=1e-5)


def test_the_key_split_weights_are_the_eager_models_attention_weights():
    eager = build("llama", attn="eager")
    t, b = far_apart(own_logits(eager, CLEAN))
    a = qkv.hf.attribute(build("llama", attn="qkv"), CLEAN, t, baseline=b, by_key=[(1, 3), (0, 1)])
    with torch.no_grad():
        attentions = eager(input_ids=CLEAN, output_attentions=True).attentions
    assert [(s.layer, s.head) for s in a.by_key] == [(1, 3), (0, 1)]
    for s in a.by_key:
        np.testing.assert_allclose(s.weights, attentions[s.layer][0, s.head, -1], atol=1e-6)
        assert s.value == a.heads[s.layer, s.head]


def eager_ld(model, ids, t, b):
    logits = own_logits(model, ids)
    return float(logits[t] - logits[b])


def test_patching_one_head_equals_the_eager_model_patched_by_hand():
    layer, head = 0, 2
    eager = build("llama", attn="eager")
    t, b = far_apart(own_logits(eager, CLEAN))
    p = qkv.hf.patching(build("llama", attn="qkv"), CLEAN, CORRUPTED, t, baseline=b)
    ld_clean, ld_corrupted, ld_patched = patched_by_hand(
        eager, layer, head, CLEAN, CORRUPTED, lambda ids: eager_ld(eager, ids, t, b)
    )
    want = (ld_patched - ld_corrupted) / (ld_clean - ld_corrupted)
    assert p.clean == pytest.approx(ld_clean, abs=1e-4)
    assert p.corrupted == pytest.approx(ld_corrupted, abs=1e-4)
    assert p.heads[layer, head] == pytest.approx(want, abs=1e-4)
    assert p.heads.shape == (2, 4) and p.residual.shape == (2, 7) and p.patterns.shape == (2, 4)
    # the residual entering layer 0 at the one differing position is the clean prompt itself
    assert p.residual[0, 3] == pytest.approx(1.0, abs=1e-5)
    assert np.abs(p.residual[0, [0, 1, 2, 4, 5, 6]]).max() < 1e-5  # same tokens: no change


def test_patching_a_heads_pattern_equals_pinning_it_to_the_clean_weights():
    layer, head = 1, 1
    eager = build("llama", attn="eager")
    t, b = far_apart(own_logits(eager, CLEAN))
    model = build("llama", attn="qkv")
    p = qkv.hf.patching(model, CLEAN, CORRUPTED, t, baseline=b, residual=False, batch=3)
    with torch.no_grad():
        pattern = eager(input_ids=CLEAN, output_attentions=True).attentions[layer][0, head]
        with qkv.hf.intervene(model, {(layer, head): {"pin": pattern}}):
            ld_pinned = eager_ld(model, CORRUPTED, t, b)
    want = (ld_pinned - p.corrupted) / (p.clean - p.corrupted)
    assert p.patterns[layer, head] == pytest.approx(want, abs=1e-4)
    assert p.residual is None


def test_patching_refuses_prompts_of_different_lengths_and_equal_answers():
    model = build("llama", attn="qkv")
    with pytest.raises(ValueError, match=r"same number of tokens, got 7 \(clean\) and 6"):
        qkv.hf.patching(model, CLEAN, CORRUPTED[:, :6], 3, baseline=4)
    with pytest.raises(ValueError, match="give the same logit difference"):
        qkv.hf.patching(model, CLEAN, CLEAN, 3, baseline=4)


@pytest.mark.parametrize("name", ["llama", "gemma2", "gpt2"])
def test_the_last_layers_lens_is_the_models_own_next_token_ranking(name):
    eager = build(name, attn="eager")
    with torch.no_grad():
        logits = eager(input_ids=CLEAN).logits[0, -1].double()
    probs = torch.softmax(logits, -1)
    t = int(torch.argsort(logits, descending=True)[6])  # the 7th likeliest
    lens = qkv.hf.lens(build(name, attn="qkv"), CLEAN, target=t, top_k=4)
    top = torch.topk(probs, 4)
    assert lens.ids[-1].tolist() == top.indices.tolist()
    np.testing.assert_allclose(lens.p[-1], top.values.numpy(), rtol=1e-5)
    assert lens.target_rank[-1] == 7 and lens.ids.shape == (2, 4)
    layers = lens.to_dict()["layers"]
    assert [x["layer"] for x in layers] == [0, 1] and layers[-1]["target_rank"] == 7
    first = layers[-1]["top"][0]
    assert first["token"] == str(top.indices[0].item()) and first["id"] == top.indices[0].item()
    assert first["p"] == pytest.approx(top.values[0].item(), rel=1e-5)


def test_texts_and_targets_go_through_the_tokenizer():
    tok = word_tokenizer(mark="Ġ")
    model = build("llama", attn="qkv")
    a = qkv.hf.attribute(model, "w5 w17 w33", "␣w7", baseline=" w9", tokenizer=tok, by_key=1)
    assert a.tokens == [" w5", " w17", " w33"]
    assert a.target.to_dict() == {"token": " w7", "id": 7} and a.baseline.id == 9
    with pytest.raises(ValueError, match=r"target '␣w7 w8' is not a single token.*␣w7 ␣w8"):
        qkv.hf.attribute(model, "w5 w17", " w7 w8", tokenizer=tok)
    with pytest.raises(ValueError, match=r"position must be an int in \[-2, 2\)"):
        qkv.hf.attribute(model, "w5 w17", "w7", tokenizer=tok, position=2)


def test_models_without_a_final_norm_or_an_unembedding_are_refused_by_name():
    with pytest.raises(ValueError, match="bert .*has no final norm"):
        qkv.hf.attribute(build("bert", attn="eager"), CLEAN, 3, by_key=0)
    with pytest.raises(ValueError, match="encoder-decoder"):
        qkv.hf.lens(build("t5", attn="eager"), CLEAN)
    bare = transformers_auto_model()
    with pytest.raises(ValueError, match="has no unembedding"):
        qkv.hf.attribute(bare, CLEAN, 3, by_key=0)
    with pytest.raises(ValueError, match="attn_implementation='qkv'"):
        qkv.hf.attribute(build("llama", attn="eager"), CLEAN, 3, by_key=2)


def transformers_auto_model():
    import transformers
    from tiny import CONFIGS

    return transformers.AutoModel.from_config(CONFIGS["llama"](), attn_implementation="eager")


@pytest.mark.slow
def test_smollm2_on_an_indirect_object_prompt(smollm2):
    from qkv.hf import bundled, loading

    tok = loading.BundledTokenizer(smollm2)
    text = "When Mary and John went to the store, John gave a drink to"
    eager = bundled.from_own(smollm2, attn="eager")
    ids = tok(text)["input_ids"]
    logits = own_logits(eager, ids)
    mary, john = (tok(w, add_special_tokens=False)["input_ids"][0, 0] for w in (" Mary", " John"))
    want = float(logits[mary] - logits[john])
    model = bundled.from_own(smollm2)
    a = qkv.hf.attribute(model, text, " Mary", baseline=" John", tokenizer=tok, by_key=3)
    assert abs(a.total() - want) <= 1e-4 * abs(want) and want > 1
    assert a.tokens[1] == " Mary" and a.target.id == int(mary)
    for split in a.by_key:
        assert split.parts.sum() == pytest.approx(split.value, rel=1e-4, abs=1e-5)
    lens = qkv.hf.lens(model, text, target=" Mary", tokenizer=tok)
    assert lens.ids[-1].tolist() == torch.topk(logits, 5).indices.tolist()
    assert lens.target_rank[-1] == 1


def test_the_key_split_watches_the_layers_the_kernels_compute():
    # a session that only watches keeps no step: every layer runs on a kernel (no weights
    # tensor comes back from the attention function), the split rows are one query each
    model = build("llama", attn="qkv")
    returned = []
    hooks = [
        m.register_forward_hook(lambda m, a, out: returned.append(out[1]))
        for _, m in qkv.hf.attention_layers(model)
    ]
    try:
        a = qkv.hf.attribute(model, CLEAN, 3, by_key=[(1, 2)])
    finally:
        for h in hooks:
            h.remove()
    assert len(returned) == 2 and all(w is None for w in returned)
    assert a.by_key[0].weights.shape == (7,)
