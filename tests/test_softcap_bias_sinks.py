"""Soft-capping, an additive bias and attention sinks: hand values, float64 references written
out independently, errors that name what came, and the trace's named steps."""

from __future__ import annotations

import math

import numpy as np
import pytest

import qkv

Q = np.array([[0.0, math.sqrt(2)]])  # (L=1, d=2)
K = np.array([[0.0, 0.0], [0.0, 1.0]])  # (S=2, d=2): scores [0, √2] with scale 1
V = np.array([[1.0, 0.0], [0.0, 1.0]])


def test_sink_takes_weight_and_adds_no_value_by_hand():
    out, t = qkv.attention(Q, K, V, scale=1.0, sinks=np.array([0.0]), return_trace=True)
    e = math.exp(math.sqrt(2))
    np.testing.assert_allclose(t.weights, [[1 / (2 + e), e / (2 + e)]], rtol=1e-15)
    np.testing.assert_allclose(t.sink, [[1 / (2 + e)]], rtol=1e-15)
    np.testing.assert_allclose(out, [[1 / (2 + e), e / (2 + e)]], rtol=1e-15)  # sink: no value
    assert t.names.index("weights") < t.names.index("sink") < t.names.index("z")


def test_softcap_and_bias_by_hand():
    _, t = qkv.attention(
        Q, K, V, scale=1.0, softcap=1.0, bias=np.array([[1.0, -0.5]]), return_trace=True
    )
    np.testing.assert_allclose(t.capped, [[0.0, math.tanh(math.sqrt(2))]], rtol=1e-15)
    np.testing.assert_allclose(t.biased, [[1.0, math.tanh(math.sqrt(2)) - 0.5]], rtol=1e-15)
    a, b = 1.0, math.tanh(math.sqrt(2)) - 0.5
    np.testing.assert_allclose(
        t.weights, [[1 / (1 + math.exp(b - a)), 1 / (1 + math.exp(a - b))]], rtol=1e-14
    )
    assert t.names[t.names.index("tempered") : t.names.index("weights")] == [
        "tempered",
        "capped",
        "biased",
        "masked",
    ]
    assert t.settings["softcap"] == 1.0


def reference(q, k, v, *, mask, cap, bias, sinks):
    """Loops over heads and rows in float64, written apart from qkv's steps."""
    H, L, d = q.shape
    G = k.shape[0]
    out = np.zeros((H, L, v.shape[-1]))
    w_all = np.zeros((H, L, k.shape[1]))
    for h in range(H):
        g = h // (H // G)
        for i in range(L):
            s = q[h, i] @ k[g].T / math.sqrt(d)
            s = cap * np.tanh(s / cap) + bias[h, i]
            s = np.where(mask[i], s, -np.inf)
            m = max(s.max(), sinks[h])
            e = np.exp(s - m)
            w = e / (e.sum() + math.exp(sinks[h] - m))
            w_all[h, i] = w
            out[h, i] = w @ v[g]
    return out, w_all


def test_all_three_with_grouped_heads_and_a_causal_mask_match_a_loop(rng):
    H, G, L, S, d = 6, 3, 5, 7, 3
    q, k, v = rng.normal(size=(H, L, d)), rng.normal(size=(G, S, d)), rng.normal(size=(G, S, d))
    bias, sinks = rng.normal(size=(H, L, S)), rng.normal(size=H)
    mask = np.tril(np.ones((L, S), bool), S - L)
    mask[0] = False  # a row that sees no key: the sink takes all its weight
    out, t = qkv.attention(
        q, k, v, mask=mask, softcap=1.5, bias=bias, sinks=sinks, return_trace=True
    )
    want, w = reference(q, k, v, mask=mask, cap=1.5, bias=bias, sinks=sinks)
    np.testing.assert_allclose(out, want, atol=1e-14)
    np.testing.assert_allclose(t.weights, w, atol=1e-15)
    np.testing.assert_allclose(t.weights.sum(-1) + t.sink[..., 0], 1.0, atol=1e-14)
    np.testing.assert_array_equal(t.sink[:, 0, 0], 1.0)


@pytest.mark.parametrize("backend", ["auto", "blocked", "torch"])
def test_every_backend_gives_the_reference_answer(rng, backend):
    torch = pytest.importorskip("torch")
    q, k, v = (rng.normal(size=(2, 4, 9, 3)) for _ in range(3))
    bias, sinks = rng.normal(size=(4, 9, 9)), rng.normal(size=4)
    if backend == "torch":
        q, k, v, bias, sinks = map(torch.from_numpy, (q, k, v, bias, sinks))
    got = qkv.attention(q, k, v, causal=True, softcap=2.0, bias=bias, sinks=sinks, backend=backend)
    want = qkv.attention(
        q, k, v, causal=True, softcap=2.0, bias=bias, sinks=sinks, backend="reference"
    )
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-15)


def test_gradients_flow_to_the_bias_and_the_sinks_like_torch_autograd(rng):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.tensor(rng.normal(size=(2, 4, 3)), requires_grad=True) for _ in range(3))
    bias = torch.tensor(rng.normal(size=(2, 4, 4)), requires_grad=True)
    sinks = torch.tensor(rng.normal(size=2), requires_grad=True)
    out = qkv.attention(q, k, v, softcap=1.0, bias=bias, sinks=sinks)
    s = torch.tanh(q @ k.transpose(-1, -2) / math.sqrt(3)) + bias  # (2, 4, 4)
    logits = torch.cat([s, sinks[:, None, None].expand(2, 4, 1)], dim=-1)
    want = torch.softmax(logits, dim=-1)[..., :-1] @ v
    torch.testing.assert_close(out, want, rtol=0, atol=1e-14)
    g = torch.autograd.grad(out.sum(), (bias, sinks))
    g_want = torch.autograd.grad(want.sum(), (bias, sinks))
    for a, b in zip(g, g_want, strict=False):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-13)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"softcap": 0.0}, "softcap must be a finite number > 0 (or None: no capping), got 0.0"),
        (
            {"softcap": "big"},
            "softcap must be a finite number > 0 (or None: no capping), got 'big'",
        ),
        (
            {"bias": np.zeros((3, 3))},
            "bias must broadcast to the scores' shape (..., L, S) = (1, 2)",
        ),
        ({"bias": np.zeros((1, 2), bool)}, "bias must be a real floating array"),
        ({"sinks": np.zeros(3)}, "sinks must hold one logit per query head, shape (1,)"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises((ValueError, TypeError)) as e:
        qkv.attention(Q, K, V, **kwargs)
    assert message in str(e.value)


def test_a_trace_with_the_new_steps_survives_json():
    _, t = qkv.attention(
        Q, K, V, softcap=3.0, bias=np.ones((1, 2)), sinks=np.array([0.5]), return_trace=True
    )
    back = qkv.Trace.from_json(t.to_json())
    for name in ("capped", "biased", "sink", "weights"):
        np.testing.assert_array_equal(back[name], t[name])
