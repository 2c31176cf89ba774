"""attn_implementation="qkv" against transformers' eager attention on tiny random models of
ten architectures: logits on a padded batch, greedy generation with a cache, dropout in training
mode, gradients, and the errors for what the adapter does not support."""

from __future__ import annotations

import pytest
from tiny import CAUSAL, CONFIGS, build, padded_batch, run, softmax_in_input_dtype

torch = pytest.importorskip("torch")


def real_positions(name, batch):
    mask = batch["attention_mask"].bool()
    return mask[:, :5] if name == "t5" else mask


@pytest.mark.parametrize(
    "dtype, tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)], ids=["float32", "float64"]
)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_logits_equal_eager_on_a_padded_batch(name, dtype, tol):
    batch = padded_batch(left=name != "bert")
    with softmax_in_input_dtype():
        want = run(build(name, attn="eager", dtype=dtype), name, batch)
    got = run(build(name, attn="qkv", dtype=dtype), name, batch)
    real = real_positions(name, batch)
    assert torch.isfinite(want[real]).all()
    torch.testing.assert_close(got[real], want[real], rtol=0, atol=tol)


@pytest.mark.parametrize(
    "name",
    [  # the two slowest to build run with the slow tests
        pytest.param(name, marks=pytest.mark.slow) if name in ("gpt_oss", "t5") else name
        for name in [*CAUSAL, "t5"]
    ],
)
def test_greedy_generation_with_a_cache_gives_eager_tokens(name):
    # 6 new tokens pass the sliding window (3) of the models that have one
    batch = padded_batch(left=True)
    tokens = []
    for attn in ("eager", "qkv"):
        model = build(name, attn=attn)
        model.generation_config.pad_token_id = 0
        with torch.no_grad():
            tokens.append(
                model.generate(**batch, max_new_tokens=6, do_sample=False, use_cache=True)
            )
    assert torch.equal(tokens[0], tokens[1])


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_dropout_in_training_mode_draws_what_eager_draws(name):
    batch = padded_batch(left=True)
    outs = []
    for attn in ("eager", "qkv"):
        model = build(name, attn=attn, dtype=torch.float64).train()
        for m in model.modules():  # attention dropout only, so the test sees that one
            if hasattr(m, "attention_dropout"):
                m.attention_dropout = 0.4
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.4 if "attn" in type(m).__name__.lower() else 0.0
        if name == "gpt2":
            for block in model.transformer.h:
                block.attn.attn_dropout.p = 0.4
        torch.manual_seed(7)
        with softmax_in_input_dtype():
            outs.append(model(**batch).logits)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(outs[1][real], outs[0][real], rtol=0, atol=1e-10)
    with torch.no_grad():  # and the draw mattered: eval mode gives something else
        assert not torch.allclose(outs[1][real], run(model.eval(), name, batch)[real])


def test_gradients_equal_eager():
    batch = padded_batch(left=True)
    grads = []
    for attn in ("eager", "qkv"):
        model = build("gpt_oss", attn=attn, dtype=torch.float64)
        with softmax_in_input_dtype():
            logits = model(**batch).logits
        logits[batch["attention_mask"].bool()].square().sum().backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    assert "model.layers.0.self_attn.sinks" in grads[1]
    for n, g in grads[0].items():
        torch.testing.assert_close(grads[1][n], g, rtol=1e-9, atol=1e-9, msg=n)


def test_output_attentions_equal_eager():
    batch = padded_batch(left=True)
    got = build("gemma2", attn="qkv", dtype=torch.float64)(**batch, output_attentions=True)
    with softmax_in_input_dtype():
        want = build("gemma2", attn="eager", dtype=torch.float64)(**batch, output_attentions=True)
    real = batch["attention_mask"].bool()
    for a, b in zip(got.attentions, want.attentions, strict=False):
        torch.testing.assert_close(a[0], b[0], rtol=0, atol=1e-12)  # unpadded sequence
        torch.testing.assert_close(
            a[1][:, real[1]][..., real[1]], b[1][:, real[1]][..., real[1]], rtol=0, atol=1e-12
        )


def test_an_unknown_keyword_is_refused_naming_the_model_and_keyword():
    from qkv.hf import adapter

    model = build("llama", attn="qkv")
    layer = model.model.layers[0].self_attn
    q = torch.zeros(1, 4, 3, 8)
    k = torch.zeros(1, 2, 3, 8)
    with pytest.raises(ValueError, match=r"'alibi_slopes' that llama \(LlamaAttention\)"):
        adapter.attention_forward(layer, q, k, k, None, scaling=1.0, alibi_slopes=torch.ones(4))


def test_float_masks_other_than_zero_and_minus_infinity_are_refused():
    from qkv.hf import adapter

    layer = build("llama", attn="qkv").model.layers[0].self_attn
    q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8)
    additive = torch.zeros(1, 1, 3, 3)
    additive[..., 0, 1:] = torch.finfo(torch.float32).min
    boolean = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    boolean[..., 0, 1:] = False
    got = adapter.attention_forward(layer, q, k, k, additive, scaling=1.0)[0]
    want = adapter.attention_forward(layer, q, k, k, boolean, scaling=1.0)[0]
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    with pytest.raises(ValueError, match="float attention mask with values other than 0"):
        adapter.attention_forward(layer, q, k, k, additive + 0.5, scaling=1.0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_half_precision_is_as_close_to_float64_as_eager(name, dtype):
    # both round; the float64 model is the reference each is measured against
    batch = padded_batch(left=name != "bert")
    real = real_positions(name, batch)
    with softmax_in_input_dtype():
        exact = run(build(name, attn="eager", dtype=torch.float64), name, batch)[real]
    eager = run(build(name, attn="eager", dtype=dtype), name, batch)[real].double()
    got = run(build(name, attn="qkv", dtype=dtype), name, batch)
    assert got.dtype == dtype and torch.isfinite(got[real]).all()
    eager_err = (eager - exact).square().mean().sqrt().item()  # RMS over every real logit
    qkv_err = (got[real].double() - exact).square().mean().sqrt().item()
    assert qkv_err <= 1.5 * eager_err, (qkv_err, eager_err)


@pytest.mark.parametrize("name", [n for n in CAUSAL if n != "gemma2"])
def test_a_nan_input_spreads_only_to_the_rows_that_see_it(name):
    # NaN in one position's embedding: the rows that see it are NaN (as in eager); the rows
    # before it are what eager computes on the prefix alone. Eager itself turns every row NaN:
    # its additive mask adds −inf to the NaN score of a masked key, and NaN − inf is NaN,
    # while qkv's contract says a masked key has no effect whatever it holds.
    model, eager = build(name, attn="qkv"), build(name, attn="eager")
    ids = torch.randint(3, 90, (1, 6), generator=torch.Generator().manual_seed(0))
    emb = model.get_input_embeddings()(ids).detach().clone()
    emb[0, 3, 0] = float("nan")
    with torch.no_grad():
        got = model(inputs_embeds=emb).logits[0]
        prefix = eager(inputs_embeds=emb[:, :3]).logits[0]
    assert torch.isnan(got[3:]).any(-1).all()
    torch.testing.assert_close(got[:3], prefix, rtol=0, atol=1e-5)


def test_a_nan_input_makes_the_same_rows_nan_as_eager_on_bidirectional_attention():
    model, eager = build("bert", attn="qkv"), build("bert", attn="eager")
    ids = torch.randint(3, 90, (1, 6), generator=torch.Generator().manual_seed(0))
    emb = model.get_input_embeddings()(ids).detach().clone()
    emb[0, 3, 0] = float("nan")
    with torch.no_grad():
        got = model(inputs_embeds=emb).logits[0]
        want = eager(inputs_embeds=emb).logits[0]
    assert torch.equal(torch.isnan(got).any(-1), torch.isnan(want).any(-1))


@pytest.mark.parametrize("name", ["llama", "qwen2", "gemma2"])
def test_greedy_generation_of_one_unpadded_sequence_gives_eager_tokens_and_scores(name):
    # no padding: transformers builds no mask (a causal flag at the prompt, nothing for each new
    # token), a path the padded batches above never take
    ids = torch.randint(3, 90, (1, 5), generator=torch.Generator().manual_seed(2))
    runs = []
    for attn in ("eager", "qkv"):
        model = build(name, attn=attn)
        model.generation_config.pad_token_id = 0
        with torch.no_grad(), softmax_in_input_dtype():
            runs.append(
                model.generate(
                    ids,
                    max_new_tokens=8,
                    do_sample=False,
                    use_cache=True,
                    output_scores=True,
                    return_dict_in_generate=True,
                )
            )
    want, got = runs
    assert torch.equal(got.sequences, want.sequences)
    for g, w in zip(got.scores, want.scores, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-5)


def test_a_call_shaped_like_an_earlier_good_one_is_still_checked():
    from qkv.hf import adapter

    layer = build("llama", attn="qkv").model.layers[0].self_attn
    gen = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 4, 1, 8, generator=gen), torch.randn(1, 2, 5, 8, generator=gen)
    v = torch.randn(1, 2, 5, 8, generator=gen)
    sees = torch.ones(1, 1, 1, 5, dtype=torch.bool)
    for _ in range(2):  # calls of the same shapes before: nothing kept between calls skips a check
        adapter.attention_forward(layer, q, k, v, None, scaling=1)
        adapter.attention_forward(layer, q, k, v, sees, scaling=1)
    with pytest.raises(TypeError, match="scale must be a finite number.*got True"):
        adapter.attention_forward(layer, q, k, v, None, scaling=True)  # True == 1, not a scale
    with pytest.raises(ValueError, match="scale must be a finite number.*got nan"):
        adapter.attention_forward(layer, q, k, v, None, scaling=float("nan"))
    with pytest.raises(ValueError, match="k and v must have the same number of keys"):
        adapter.attention_forward(layer, q, k, v[:, :, :4], None, scaling=1)
    with pytest.raises(ValueError, match="mask must broadcast to the scores' shape"):
        adapter.attention_forward(layer, q, k, v, sees[..., :4], scaling=1)
    # a float64 k: q and v become float64 too, and z is what float64 eager attention gives
    z, _ = adapter.attention_forward(layer, q, k.double(), v, None, scaling=1)
    weights = torch.softmax(q.double() @ k.double().repeat_interleave(2, 1).mT, dim=-1)
    want = (weights @ v.double().repeat_interleave(2, 1)).transpose(1, 2)  # (1, L, H, d)
    assert z.dtype == torch.float64
    torch.testing.assert_close(z, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("L", [1, 70], ids=["one query", "70 queries"])  # 4 or 280 rows of z
@pytest.mark.parametrize("toward", ["+inf", "-inf"])
def test_scores_that_overflow_are_refused_after_good_calls_of_the_same_shapes(L, toward):
    # the checks see shapes, not numbers: SDPA's answer is vouched for on every call
    from qkv.hf import adapter

    layer = build("llama", attn="qkv").model.layers[0].self_attn
    gen = torch.Generator().manual_seed(4)
    q, k = torch.randn(1, 4, L, 8, generator=gen), torch.randn(1, 2, 70, 8, generator=gen)
    v = torch.randn(1, 2, 70, 8, generator=gen)
    for _ in range(2):
        z, _ = adapter.attention_forward(layer, q, k, v, None, scaling=1)
        assert torch.isfinite(z).all()
    big_q, big_k = q.abs() * 1e20, k.abs() * 1e20 + 1e20  # every |q·k| ~ 1e40 > float32's max
    if toward == "-inf":
        big_k = -big_k
    with pytest.raises(ValueError, match=r"the scores overflow (torch\.)?float32"):
        adapter.attention_forward(layer, big_q, big_k, v, None, scaling=1)


@pytest.mark.parametrize("L", [1, 70], ids=["one query", "70 queries"])
def test_garbage_at_a_key_the_mask_hides_changes_no_head_of_a_step(L):
    # NaN and inf at hidden key 2 of the second K/V head only: torch's SDPA turns the rows of
    # that head's queries NaN, which the kernel must see wherever they are among the rows
    from qkv.hf import adapter

    layer = build("llama", attn="qkv").model.layers[0].self_attn
    gen = torch.Generator().manual_seed(5)
    q, k = torch.randn(1, 4, L, 8, generator=gen), torch.randn(1, 2, 5, 8, generator=gen)
    v = torch.randn(1, 2, 5, 8, generator=gen)
    sees = torch.ones(1, 1, L, 5, dtype=torch.bool)
    sees[..., 2] = False
    k[0, 1, 2, 0], v[0, 1, 2, 3] = float("nan"), float("inf")
    z, _ = adapter.attention_forward(layer, q, k, v, sees, scaling=1)
    kept_k = k[:, :, [0, 1, 3, 4]].double().repeat_interleave(2, 1)  # (1, 4, 4, 8)
    kept_v = v[:, :, [0, 1, 3, 4]].double().repeat_interleave(2, 1)
    want = (torch.softmax(q.double() @ kept_k.mT, dim=-1) @ kept_v).transpose(1, 2)
    torch.testing.assert_close(z.double(), want, rtol=0, atol=1e-6)
