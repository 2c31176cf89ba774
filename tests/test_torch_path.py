"""One implementation of the math: torch tensors go through the same steps as NumPy arrays."""

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="the torch path needs torch (pip install torch==2.13.0)"
)

import qkv  # noqa: E402


def test_torch_path_equals_numpy_path(rng):
    q, k, v = (
        rng.normal(size=(2, 4, 5, 3)),
        rng.normal(size=(2, 2, 6, 3)),
        rng.normal(size=(2, 2, 6, 7)),
    )
    mask = rng.random((5, 6)) > 0.3
    mask[2] = False  # a fully masked row
    want, tr_np = qkv.attention(q, k, v, mask=mask, causal=True, temperature=0.8, return_trace=True)
    got, tr_t = qkv.attention(
        *map(torch.from_numpy, (q, k, v)),
        mask=torch.from_numpy(mask),
        causal=True,
        temperature=0.8,
        return_trace=True,
    )
    assert isinstance(got, torch.Tensor)
    assert np.allclose(got.numpy(), want, rtol=0, atol=1e-14)
    for name in tr_np.names:
        assert np.allclose(tr_t[name].numpy(), tr_np[name], rtol=0, atol=1e-14, equal_nan=True)


def test_numpy_mask_with_torch_inputs(rng):
    q = torch.from_numpy(rng.normal(size=(3, 4)))
    mask = np.array([True, False, True])
    out = qkv.attention(q, q, q, mask=mask)
    ref = qkv.attention(q.numpy(), q.numpy(), q.numpy(), mask=mask)
    assert np.allclose(out.numpy(), ref, rtol=0, atol=1e-15)


def test_gradients_match_finite_differences(rng):
    q, k, v = (
        torch.tensor(rng.normal(size=s), requires_grad=True) for s in [(3, 4), (5, 4), (5, 2)]
    )
    mask = torch.from_numpy(rng.random((3, 5)) > 0.3)
    mask[:, 0] = True

    def f(q, k, v):
        return qkv.attention(q, k, v, mask=mask, causal="top-left", temperature=0.7)

    assert torch.autograd.gradcheck(f, (q, k, v), eps=1e-6, atol=1e-8)


def test_multihead_with_torch_weights_trains(rng):
    mha = qkv.MultiHeadAttention(8, 2, seed=0, n_kv_heads=1)
    params = {n: torch.tensor(a, requires_grad=True) for n, a in mha.parameters().items()}
    tmha = qkv.MultiHeadAttention.from_weights(**params)
    x = rng.normal(size=(4, 8))
    y = tmha(torch.from_numpy(x), causal=True)
    assert np.allclose(y.detach().numpy(), mha(x, causal=True), rtol=0, atol=1e-14)
    y.square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in params.values())


def test_half_precision_softmax_runs_in_float32(rng):
    q = torch.tensor(rng.normal(size=(3, 4)), dtype=torch.bfloat16)
    out, tr = qkv.attention(q, q, q, return_trace=True)
    assert tr.weights.dtype == torch.float32
    assert out.dtype == torch.bfloat16
    ref = qkv.attention(*(q.double().numpy() for _ in range(3)))
    assert np.allclose(out.double().numpy(), ref, atol=3e-2)
