"""float64 results against torch's own attention: SDPA and nn.MultiheadAttention."""

import math

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="torch is the reference here (pip install torch==2.13.0)"
)
F = torch.nn.functional
from torch.nn.attention.bias import causal_lower_right, causal_upper_left  # noqa: E402

import qkv  # noqa: E402


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def sdpa(q, k, v, **kw):
    return F.scaled_dot_product_attention(_t(q), _t(k), _t(v), **kw).numpy()


@pytest.mark.parametrize("L,S", [(3, 3), (5, 7), (1, 11)])
def test_plain_matches_sdpa(rng, L, S):
    q, k, v = (
        rng.normal(size=(2, 3, L, 5)),
        rng.normal(size=(2, 3, S, 5)),
        rng.normal(size=(2, 3, S, 7)),
    )
    assert np.allclose(qkv.attention(q, k, v), sdpa(q, k, v), rtol=0, atol=1e-13)


def test_boolean_mask_matches_sdpa(rng):
    q, k, v = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 7, 4)), rng.normal(size=(3, 7, 2))
    mask = rng.random((3, 5, 7)) > 0.4
    mask[..., 0] = True  # keep every row alive: torch gives NaN for fully masked rows
    ours = qkv.attention(q, k, v, mask=mask)
    assert np.allclose(ours, sdpa(q, k, v, attn_mask=_t(mask)), rtol=0, atol=1e-13)


@pytest.mark.parametrize(
    "align,bias", [("bottom-right", causal_lower_right), ("top-left", causal_upper_left)]
)
def test_causal_alignments_match_torch_bias(rng, align, bias):
    L, S = 5, 9
    q, k, v = rng.normal(size=(2, L, 6)), rng.normal(size=(2, S, 6)), rng.normal(size=(2, S, 3))
    ours = qkv.attention(q, k, v, causal=align)
    ref = sdpa(q[None], k[None], v[None], attn_mask=bias(L, S))[0]
    assert np.allclose(ours, ref, rtol=0, atol=1e-13)
    if align == "bottom-right":
        assert np.array_equal(qkv.attention(q, k, v, causal=True), ours)


def test_scale_and_temperature_fold_into_torch_scale(rng):
    q, k, v = rng.normal(size=(4, 6)), rng.normal(size=(5, 6)), rng.normal(size=(5, 2))
    ours = qkv.attention(q, k, v, scale=0.3, temperature=0.25)
    ref = sdpa(q, k, v, scale=0.3 / 0.25)
    assert np.allclose(ours, ref, rtol=0, atol=1e-13)
    ours = qkv.attention(q, k, v, temperature=3.0)
    ref = sdpa(q, k, v, scale=1 / math.sqrt(6) / 3.0)
    assert np.allclose(ours, ref, rtol=0, atol=1e-13)


def test_grouped_query_matches_enable_gqa(rng):
    q, k, v = (
        rng.normal(size=(1, 6, 4, 8)),
        rng.normal(size=(1, 2, 4, 8)),
        rng.normal(size=(1, 2, 4, 8)),
    )
    ref = sdpa(q, k, v, enable_gqa=True, is_causal=True)
    assert np.allclose(qkv.attention(q, k, v, causal=True), ref, rtol=0, atol=1e-13)


def test_multihead_matches_nn_multiheadattention(rng):
    d_model, H, L = 12, 3, 5
    mha = qkv.MultiHeadAttention(d_model, H, seed=7)
    mha.b_O = rng.normal(size=d_model)
    ref = torch.nn.MultiheadAttention(d_model, H, bias=True, batch_first=True, dtype=torch.float64)
    d = d_model // H
    with torch.no_grad():
        # torch stacks rows: in_proj_weight (3·d_model, d_model), rows of head h at h·d:(h+1)·d.
        for i, W in enumerate((mha.W_Q, mha.W_K, mha.W_V)):
            rows = np.concatenate([W[h].T for h in range(H)], axis=0)  # (d_model, d_model)
            ref.in_proj_weight[i * d_model : (i + 1) * d_model] = _t(rows)
        ref.in_proj_bias.zero_()
        ref.out_proj.weight.copy_(_t(mha.W_O.reshape(H * d, d_model).T))
        ref.out_proj.bias.copy_(_t(mha.b_O))
    x = rng.normal(size=(2, L, d_model))
    causal = ~qkv.masks.causal(L)  # torch's bool attn_mask: True = NOT allowed
    want, want_w = ref(_t(x), _t(x), _t(x), attn_mask=_t(causal), average_attn_weights=False)
    got, tr = mha(x, causal=True, return_trace=True)
    assert np.allclose(got, want.detach().numpy(), rtol=0, atol=1e-13)
    assert np.allclose(tr.weights, want_w.detach().numpy(), rtol=0, atol=1e-13)


def test_cross_attention_matches_nn_multiheadattention(rng):
    d_model, H = 8, 2
    mha = qkv.MultiHeadAttention(d_model, H, seed=3)
    ref = torch.nn.MultiheadAttention(d_model, H, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for i, W in enumerate((mha.W_Q, mha.W_K, mha.W_V)):
            ref.in_proj_weight[i * d_model : (i + 1) * d_model] = _t(
                np.concatenate([W[h].T for h in range(H)], axis=0)
            )
        ref.out_proj.weight.copy_(_t(mha.W_O.reshape(d_model, d_model).T))
    x, ctx = rng.normal(size=(1, 3, d_model)), rng.normal(size=(1, 6, d_model))
    want, _ = ref(_t(x), _t(ctx), _t(ctx))
    assert np.allclose(mha(x, ctx), want.detach().numpy(), rtol=0, atol=1e-13)
