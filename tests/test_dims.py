"""qkv.explain.dims: the tutorials' numbers, torch's parameter and FLOP counts as references."""

import math

import numpy as np
import pytest

from qkv import MultiHeadAttention
from qkv.explain.dims import MODELS, AttentionDims, model, nbytes, sections


@pytest.mark.parametrize(
    "name, d_head",
    [
        ("andrea-12m", 32),
        ("andrea-120m", 64),
        ("andrea-480m", 64),
        ("andrea-2b", 128),
        ("mini-gpt", 16),
        ("gpt2-small", 64),
        ("minilm-l6", 32),
        ("smollm2-135m", 64),
    ],
)
def test_d_head_of_the_known_models(name, d_head):
    assert model(name).d_head == d_head


def test_tutorial_exercises():
    assert f"{model('andrea-2b').sqrt_d_head:.2f}" == "11.31"  # √128
    assert model("andrea-120m").sqrt_d_head == 8.0
    assert model("andrea-120m").scores_per_head == 1_048_576  # 1024 × 1024
    p = model("mini-gpt").parameters()
    assert p["W_Q"] + p["W_K"] + p["W_V"] == 12_288  # 3 · 64 · 16 · 4 heads
    assert p["W_O"] == 4_096
    assert model("mini-gpt").params_per_layer == 16_384
    assert set(p) == {"W_Q", "W_K", "W_V", "W_O"}  # no biases


def test_parameters_match_torch_multihead_attention():
    torch = pytest.importorskip("torch")
    mha = torch.nn.MultiheadAttention(768, 12, bias=True)
    assert model("gpt2-small").params_per_layer == sum(p.numel() for p in mha.parameters())
    assert model("gpt2-small").params_per_layer == 2_362_368  # c_attn 1,771,776 + c_proj 590,592


def test_grouped_query_parameters_match_the_engine_weights():
    config = model("smollm2-135m")
    mha = MultiHeadAttention(576, 9, 0, n_kv_heads=3, out_bias=False)
    sizes = {n: a.size for n, a in mha.parameters().items()}
    assert config.parameters() == sizes
    assert config.params_per_layer == 2 * 576 * 576 + 2 * 576 * 192  # 884,736
    assert config.params_per_layer * config.layers == 26_542_080


def test_kv_cache_bytes_per_token():
    config = model("smollm2-135m")
    assert config.kv_cache_values_per_token() == 2 * 3 * 64 * 30
    assert config.to_dict()["kv_cache_bytes_per_token"] == {"float32": 46_080, "bfloat16": 23_040}


def test_score_memory():
    d = model("andrea-120m").to_dict()
    assert d["scores_per_layer"] == 12 * 1024**2
    assert d["score_bytes_per_layer"] == {"float32": 48 * 2**20, "bfloat16": 24 * 2**20}


def test_flops_match_torch_flop_counter():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    d_model, H, G, T = 12, 4, 2, 5
    config = AttentionDims(d_model, H, n_kv_heads=G, context=T)
    dh = config.d_head
    x = torch.randn(T, d_model, dtype=torch.float64)
    W_Q, W_K, W_V = (torch.randn(d_model, n * dh, dtype=torch.float64) for n in (H, G, G))
    W_O = torch.randn(H * dh, d_model, dtype=torch.float64)
    counts = {}

    def counted(part, fn):
        with FlopCounterMode(display=False) as fc:
            result = fn()
        counts[part] = fc.get_total_flops()
        return result

    q, k, v = counted("Q, K, V projections", lambda: (x @ W_Q, x @ W_K, x @ W_V))
    q = q.reshape(T, H, dh).transpose(0, 1)  # (H, T, dh)
    k = k.reshape(T, G, dh).transpose(0, 1).repeat_interleave(H // G, dim=0)  # (H, T, dh)
    v = v.reshape(T, G, dh).transpose(0, 1).repeat_interleave(H // G, dim=0)
    s = counted("scores q·kᵀ", lambda: q @ k.transpose(1, 2))  # (H, T, T)
    z = counted("weights·v", lambda: torch.softmax(s / math.sqrt(dh), -1) @ v)  # (H, T, dh)
    counted("W_O projection", lambda: z.transpose(0, 1).reshape(T, H * dh) @ W_O)
    assert config.flops() == counts


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(d_model=100, n_heads=12),
            "d_model must be divisible by n_heads, got d_model=100, n_heads=12",
        ),
        (dict(d_model=0, n_heads=1), "d_model must be a positive integer, got 0"),
        (dict(d_model=-64, n_heads=4), "d_model must be a positive integer, got -64"),
        (dict(d_model=64, n_heads=0), "n_heads must be a positive integer, got 0"),
        (dict(d_model=64, n_heads=4, n_kv_heads=3), "n_heads must be divisible by n_kv_heads"),
        (dict(d_model=64, n_heads=4, context=0), "context must be a positive integer, got 0"),
        (dict(d_model=64, n_heads=4, layers=True), "layers must be a positive integer, got True"),
        (dict(d_model=64.0, n_heads=4), "d_model must be a positive integer, got 64.0"),
    ],
)
def test_invalid_sizes_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        AttentionDims(**kwargs)


def test_unknown_model_names_the_choices():
    with pytest.raises(ValueError, match="unknown model 'gpt5'; choose one of .*'andrea-12m'"):
        model("gpt5")
    assert list(MODELS)[:4] == ["andrea-12m", "andrea-120m", "andrea-480m", "andrea-2b"]


def test_report_and_bytes_text():
    assert nbytes(1_048_576) == "1,048,576 B (1.00 MiB)"
    assert nbytes(512) == "512 B"
    text = "\n".join(line for sec in sections(model("andrea-2b")) for line in sec.lines)
    assert "d_head = d_model / n_heads = 4096 / 32 = 128" in text
    assert "√d_head = √128 = 11.31" in text
    assert np.isclose(model("andrea-2b").sqrt_d_head, math.sqrt(128))
