"""Gradients through the reference backend: torch.autograd.gradcheck in float64, and equal to
torch SDPA's (1e-8) on random inputs, tied rows (a zero query, duplicate keys) and masks."""

import numpy as np
import pytest

import qkv

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _inputs(seed, L=4, S=6, d_k=5, d_v=3, zero_q=False, duplicate_keys=False):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(2, n, d, generator=g, dtype=torch.float64)
        for n, d in ((L, d_k), (S, d_k), (S, d_v))
    )
    if zero_q:
        q = torch.zeros_like(q)  # every score 0: the max is tied S ways
    if duplicate_keys:
        k[:, 3] = k[:, 1]  # two keys tie for every row
        q[:, 0] = k[:, 1] * 3  # row 0's max is one of the tied pair
    return [a.requires_grad_() for a in (q, k, v)]


CASES = {
    "random": {},
    "zero query": {"zero_q": True},
    "duplicate keys": {"duplicate_keys": True},
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("masking", [{}, {"causal": True}, {"mask": "random"}])
def test_gradcheck_through_the_reference(case, masking):
    q, k, v = _inputs(1, **CASES[case])
    kwargs = dict(masking)
    if kwargs.get("mask") == "random":
        m = torch.rand(4, 6, generator=torch.Generator().manual_seed(2)) > 0.4
        m[:, 0] = True
        kwargs["mask"] = m
    torch.autograd.gradcheck(
        lambda q, k, v: qkv.attention(q, k, v, backend="reference", **kwargs), (q, k, v)
    )


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("backend", ["reference", "torch"])
def test_gradients_equal_torch_sdpa(case, causal, backend):
    q, k, v = _inputs(3, L=6, S=6, **CASES[case])
    w = torch.randn(2, 6, 3, dtype=torch.float64)  # a loss that weighs every output
    ours = torch.autograd.grad(
        (qkv.attention(q, k, v, causal=causal, backend=backend) * w).sum(), (q, k, v)
    )
    theirs = torch.autograd.grad(
        (F.scaled_dot_product_attention(q, k, v, is_causal=causal) * w).sum(), (q, k, v)
    )
    for name, a, b in zip("qkv", ours, theirs, strict=False):
        assert torch.allclose(a, b, rtol=0, atol=1e-8), (name, (a - b).abs().max())


def test_zero_query_gradient_is_not_zero():
    # the max subtracted in softmax carries no gradient: a zero query still learns
    q, k, v = _inputs(4, zero_q=True)
    (g,) = torch.autograd.grad(qkv.attention(q, k, v, backend="reference").sum(), q)
    (expected,) = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v).sum(), q)
    assert g.abs().sum() > 1 and torch.allclose(g, expected, rtol=0, atol=1e-8)


def test_logsumexp_gradient_is_the_softmax():
    s = torch.tensor([[0.0, 0.0, 1.0], [2.0, 2.0, -1.0]], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(qkv.steps.logsumexp(s).sum(), s)
    assert torch.allclose(g, torch.softmax(s, -1), rtol=0, atol=1e-15)
    assert np.allclose(qkv.steps.logsumexp(s).detach(), torch.logsumexp(s, -1).detach())


@pytest.mark.parametrize("masking", ["none", "causal", "mask with a dead row"])
@pytest.mark.parametrize("grouped", [False, True])
def test_bias_and_sink_gradients_through_torch_equal_the_reference(masking, grouped):
    g = torch.Generator().manual_seed(6)
    H, G, L, S = 4, (2 if grouped else 4), 5, 6
    q = torch.randn(2, H, L, 3, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, G, S, 3, generator=g, dtype=torch.float64) for _ in range(2))
    bias = torch.randn(H, L, S, generator=g, dtype=torch.float64)  # broadcasts over the batch
    sinks = torch.randn(H, generator=g, dtype=torch.float64)
    kwargs = {"causal": True} if masking == "causal" else {}
    if masking == "mask with a dead row":
        m = torch.rand(L, S, generator=g) > 0.3
        m[1] = False  # the sink takes all of row 1's weight: z = 0, no gradient to its bias
        kwargs["mask"] = m
    inputs = [a.requires_grad_() for a in (q, k, v, bias, sinks)]
    w = torch.randn(2, H, L, 3, generator=g, dtype=torch.float64)  # weighs every output

    def grads(backend):
        out = qkv.attention(*inputs[:3], bias=inputs[3], sinks=inputs[4], backend=backend, **kwargs)
        return out, torch.autograd.grad((out * w).sum(), inputs)

    (out, ours), (want, theirs) = grads("torch"), grads("reference")
    assert torch.allclose(out, want, rtol=0, atol=1e-12)
    for name, a, b in zip(("q", "k", "v", "bias", "sinks"), ours, theirs, strict=False):
        assert a.abs().sum() > 0, name
        assert torch.allclose(a, b, rtol=0, atol=1e-10), (name, (a - b).abs().max())


def test_gradcheck_through_torch_with_bias_and_sinks():
    g = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(2, 3, 2, generator=g, dtype=torch.float64) for _ in range(3))
    bias = torch.randn(3, 3, generator=g, dtype=torch.float64)
    sinks = torch.randn(2, generator=g, dtype=torch.float64)
    torch.autograd.gradcheck(
        lambda q, k, v, b, s: qkv.attention(q, k, v, bias=b, sinks=s, causal=True, backend="torch"),
        [a.requires_grad_() for a in (q, k, v, bias, sinks)],
    )
