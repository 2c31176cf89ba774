"""One contract, every backend: a table of hostile inputs, each with the documented result
(against float64 math written out row by row here) or the documented error.

The backends come from the code (``dispatch.BACKENDS`` minus "auto"), so a new kernel joins
this table by being listed there.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
import pytest

import qkv
from qkv.kernels import dispatch

torch = pytest.importorskip("torch")

BACKENDS = [b for b in dispatch.BACKENDS if b != "auto"]


def oracle(q, k, v, *, mask=None, causal=False, scale=None, temperature=1.0):
    """The README's conventions in float64, one row at a time over the keys the row sees."""
    q, k, v = (_f64(a) for a in (q, k, v))
    if q.ndim >= 3 and k.ndim >= 3 and q.shape[-3] != k.shape[-3]:  # grouped K/V heads
        r = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, r, axis=-3), np.repeat(v, r, axis=-3)
    L, S, d_k, d_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (np.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))
    seen = np.ones(lead + (L, S), bool)
    if mask is not None:
        seen = seen & _f64(mask).astype(bool)
    if causal:
        offset = S - L if causal in (True, "bottom-right") else 0
        seen = seen & (np.arange(S)[None, :] <= np.arange(L)[:, None] + offset)
    c = (1 / math.sqrt(d_k) if d_k else 1.0) if scale is None else scale
    out = np.zeros(lead + (L, d_v))
    for idx in np.ndindex(*lead):
        for i in range(L):
            keys = np.flatnonzero(seen[idx][i])
            if not len(keys):
                continue  # sees no key: 0
            s = np.array([q[idx][i] @ k[idx][j] for j in keys]) * c / temperature
            vs = v[idx][keys]
            if np.isnan(s).any() or (s == np.inf).any() or (s == -np.inf).all() \
                    or not np.isfinite(vs).all():
                out[idx][i] = np.nan
                continue
            e = np.exp(s - s.max())
            out[idx][i] = (e / e.sum()) @ vs
    return out


def _f64(a):
    if hasattr(a, "detach"):
        a = a.detach().to(torch.float64) if a.is_floating_point() else a.detach()
        return a.numpy()
    a = np.asarray(a)
    return a if a.dtype == bool else a.astype(np.float64)


class Case(NamedTuple):
    name: str
    make: Callable  # rng -> kwargs of qkv.attention
    error: tuple | None = None  # (exception type, message pattern) when the contract refuses


def _qkv(rng, L=3, S=5, d_k=4, d_v=2, lead=(), dtype=np.float64):
    return {"q": rng.normal(size=(*lead, L, d_k)).astype(dtype),
            "k": rng.normal(size=(*lead, S, d_k)).astype(dtype),
            "v": rng.normal(size=(*lead, S, d_v)).astype(dtype)}


def _with(base, **changes):
    return {**base, **changes}


def _set(a, index, value):
    a = a.copy()
    a[index] = value
    return a


def _row_mask(L, S, dead_row=None, hidden_key=None):
    m = np.ones((L, S), bool)
    if dead_row is not None:
        m[dead_row] = False
    if hidden_key is not None:
        m[:, hidden_key] = False
    return m


def _masked_garbage(rng):
    a = _qkv(rng, dtype=np.float32)
    a["k"] = _set(a["k"], (1, 0), np.nan)
    a["v"] = _set(_set(a["v"], (1, 1), np.inf), (3, 0), -np.inf)
    a["mask"] = _row_mask(3, 5, hidden_key=[1, 3])
    return a


def _visible_neg_inf_key(rng):
    a = _qkv(rng)
    a["q"] = np.abs(a["q"]) + 0.1
    a["k"] = _set(a["k"], 2, -np.inf)  # every row scores key 2 at −inf: weight 0
    return a


def _all_neg_inf(rng):
    a = _qkv(rng)
    a["q"] = np.abs(a["q"]) + 0.1
    a["k"] = np.full_like(a["k"], -np.inf)
    a["mask"] = _row_mask(3, 5, dead_row=1)  # row 1 sees nothing: still 0
    return a


def _tensors(rng, dtype):
    return {name: torch.tensor(a, dtype=dtype) for name, a in _qkv(rng, L=6, S=7).items()}


CASES = [
    Case("plain float64", lambda rng: _qkv(rng)),
    Case("plain float32", lambda rng: _qkv(rng, dtype=np.float32)),
    Case("empty L", lambda rng: _qkv(rng, L=0)),
    Case("empty S", lambda rng: _qkv(rng, S=0)),
    Case("empty S, causal", lambda rng: {**_qkv(rng, S=0), "causal": True}),
    Case("L < S causal bottom-right", lambda rng: {**_qkv(rng, L=3, S=6), "causal": True}),
    Case("L < S causal top-left", lambda rng: {**_qkv(rng, L=3, S=6), "causal": "top-left"}),
    Case("L > S causal bottom-right (first rows see nothing)",
         lambda rng: {**_qkv(rng, L=6, S=3), "causal": True}),
    Case("L > S causal top-left", lambda rng: {**_qkv(rng, L=6, S=3), "causal": "top-left"}),
    Case("all-masked row", lambda rng: {**_qkv(rng), "mask": _row_mask(3, 5, dead_row=1)}),
    Case("all-masked row with a NaN query",
         lambda rng: {**(a := _qkv(rng)), "q": _set(a["q"], 1, np.nan),
                      "mask": _row_mask(3, 5, dead_row=1)}),
    Case("every row masked", lambda rng: {**_qkv(rng), "mask": np.zeros((3, 5), bool)}),
    Case("-1e9 float mask", lambda rng: {**_qkv(rng), "mask": np.where(
        _row_mask(3, 5, hidden_key=2), 0.0, -1e9)}, (TypeError, "mask must be boolean")),
    Case("mask of the wrong shape", lambda rng: {**_qkv(rng), "mask": np.ones((3, 4), bool)},
         (ValueError, r"mask must broadcast .* \(3, 5\)")),
    Case("d_k mismatch", lambda rng: {**_qkv(rng), "k": np.ones((5, 3))},
         (ValueError, r"same last dimension d_k.*\(3, 4\).*\(5, 3\)")),
    Case("non-contiguous views", lambda rng: {
        name: a[..., ::2, :] if name == "q" else a[:, ::-1][:, ::-1]
        for name, a in _qkv(rng, L=6, lead=(2,)).items()}),
    Case("transposed (Fortran-order) inputs", lambda rng: {
        name: np.asfortranarray(a) for name, a in _qkv(rng).items()}),
    Case("negative strides", lambda rng: {name: a[::-1] for name, a in _qkv(rng).items()}),
    Case("negative strides, float32, masked",
         lambda rng: {**{name: a[..., ::-1, :] for name, a in
                         _qkv(rng, dtype=np.float32).items()},
                      "mask": _row_mask(3, 5, hidden_key=4)[::-1]}),
    Case("0 heads", lambda rng: _qkv(rng, lead=(0,))),
    Case("0 batch, 2 heads", lambda rng: _qkv(rng, lead=(0, 2))),
    Case("d_v = 0", lambda rng: _qkv(rng, d_v=0)),
    Case("d_k = 0 (uniform weights)", lambda rng: _qkv(rng, d_k=0)),
    Case("integer inputs", lambda rng: {name: np.round(a * 3).astype(np.int64)
                                        for name, a in _qkv(rng).items()}),
    Case("bool inputs", lambda rng: {name: a > 0 for name, a in _qkv(rng).items()}),
    Case("float16", lambda rng: {name: a * 4 for name, a in
                                 _qkv(rng, L=64, S=64, d_k=64, d_v=64, dtype=np.float16).items()}),
    Case("float16 causal", lambda rng: {**{name: a * 4 for name, a in _qkv(
        rng, L=64, S=64, d_k=48, d_v=64, dtype=np.float16).items()}, "causal": True,
        "temperature": 0.7}),  # scale/τ not a power of 2: q·(scale/τ) would round in float16
    Case("bfloat16 tensors", lambda rng: _tensors(rng, torch.bfloat16)),
    Case("float64 tensors, causal", lambda rng: {**_tensors(rng, torch.float64), "causal": True}),
    Case("huge scale (the argmax)", lambda rng: {**_qkv(rng), "scale": 1e30}),
    Case("tiny scale (uniform)", lambda rng: {**_qkv(rng), "scale": 1e-30}),
    Case("tiny τ = 1e-30, float32 (the argmax)",
         lambda rng: {**_qkv(rng, dtype=np.float32), "temperature": 1e-30}),
    Case("tiny τ, tied keys share the weight",
         lambda rng: {**(a := _qkv(rng)), "k": _set(a["k"], 3, a["k"][1]),
                      "temperature": 1e-30}),
    Case("huge τ (uniform)", lambda rng: {**_qkv(rng, dtype=np.float32), "temperature": 1e30}),
    Case("τ = 1e-310 overflows float64", lambda rng: {**_qkv(rng), "temperature": 1e-310},
         (ValueError, r"temperature 1e-310 is too small.*overflows float64")),
    Case("|q·k| ~ 1e40 overflows float32",
         lambda rng: {name: a * 1e20 if name in "qk" else a
                      for name, a in _qkv(rng, dtype=np.float32).items()},
         (ValueError, r"scores overflow float32.*larger τ")),
    Case("scores overflow to −inf everywhere in float32",
         lambda rng: {**(a := _qkv(rng, dtype=np.float32)), "q": np.abs(a["q"]) * 1e20,
                      "k": -np.abs(a["k"]) * 1e20 - 1e20},
         (ValueError, r"scores overflow float32")),
    Case("NaN/inf in k and v of masked keys", _masked_garbage),
    Case("NaN/inf in the last key, which causal hides from all but the last row",
         lambda rng: {**(a := _qkv(rng, L=5, S=5)), "k": _set(a["k"], 4, np.nan),
                      "v": _set(a["v"], 4, np.inf), "causal": True}),
    Case("NaN in a query (its row is NaN)",
         lambda rng: {**(a := _qkv(rng)), "q": _set(a["q"], (1, 2), np.nan)}),
    Case("NaN in a visible key (rows that see it are NaN)",
         lambda rng: {**(a := _qkv(rng, L=5, S=5)), "k": _set(a["k"], (2, 0), np.nan),
                      "causal": True}),
    Case("inf in a visible value (rows that see it are NaN)",
         lambda rng: {**(a := _qkv(rng, L=5, S=5)), "v": _set(a["v"], (3, 1), np.inf),
                      "causal": True}),
    Case("+inf in a visible key", lambda rng: {**(a := _qkv(rng)),
                                               "q": np.abs(a["q"]) + 0.1,
                                               "k": _set(a["k"], 0, np.inf)}),
    Case("−inf score at a visible key (weight 0)", _visible_neg_inf_key),
    Case("every visible score −inf (NaN)", _all_neg_inf),
    Case("5-D inputs with a 4-D mask",
         lambda rng: {**_qkv(rng, lead=(2, 3, 2)),
                      "mask": rng.random((3, 2, 3, 5)) > 0.3}),
    Case("grouped K/V heads with a mask",
         lambda rng: {"q": rng.normal(size=(4, 3, 4)), "k": rng.normal(size=(2, 5, 4)),
                      "v": rng.normal(size=(2, 5, 3)), "mask": rng.random((3, 5)) > 0.4}),
    Case("one decoding row against a long cache",
         lambda rng: {**_qkv(rng, L=1, S=700, d_k=8, d_v=4, lead=(3,)), "causal": True}),
    Case("a large problem (tiles, threads)",
         lambda rng: {**_qkv(rng, L=300, S=600, d_k=8, d_v=4, lead=(2,),
                             dtype=np.float32), "causal": True}),
]


def _tolerance(dtype, v):
    """(rtol, atol): the output's own rounding (float16/bfloat16 keep 11/8 bits) on top of a
    float32/float64 computation; atol in units of the largest finite |v|."""
    v = np.abs(_f64(v))
    scale = float(v[np.isfinite(v)].max(initial=1.0))
    rtol, atol = {"float64": (0, 1e-12), "float32": (0, 1e-5), "float16": (1e-3, 1e-4),
                  "bfloat16": (8e-3, 1e-3)}[str(dtype).removeprefix("torch.")]
    return rtol, atol * scale


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_backend_keeps_the_contract(case, backend):
    kwargs = case.make(np.random.default_rng(7))
    tensors = any(hasattr(a, "detach") for a in kwargs.values())
    if case.error is not None:
        error, match = case.error
        with pytest.raises(error, match=match):
            qkv.attention(**kwargs, backend=backend)
        return
    try:
        out = qkv.attention(**kwargs, backend=backend)
    except TypeError as e:  # a NumPy kernel given tensors: the documented refusal
        assert tensors and "runs on NumPy arrays" in str(e), e
        return
    q = kwargs["q"]
    if tensors:
        in_dtype = q.dtype if q.is_floating_point() else torch.float64
    else:
        in_dtype = q.dtype if np.issubdtype(q.dtype, np.floating) else np.dtype(np.float64)
    assert out.dtype == in_dtype, (out.dtype, in_dtype)  # ints and bools run in float64
    expected = oracle(**kwargs)
    got = _f64(out)
    assert got.shape == expected.shape
    assert np.array_equal(np.isnan(got), np.isnan(expected)), "NaN rows differ"
    rtol, atol = _tolerance(out.dtype, kwargs["v"])
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_garbage_gives_what_deleting_the_keys_gives(backend):
    a = _masked_garbage(np.random.default_rng(3))
    keep = [0, 2, 4]
    out = qkv.attention(**a, backend=backend)
    deleted = qkv.attention(a["q"], a["k"][keep], a["v"][keep], backend=backend)
    np.testing.assert_allclose(out, deleted, rtol=0, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_weights_of_a_nan_row_and_a_dead_row(backend):
    a = _all_neg_inf(np.random.default_rng(5))
    out = qkv.attention(**a, backend=backend)
    assert np.isnan(out[[0, 2]]).all() and (out[1] == 0).all()
    w = qkv.attention_weights(a["q"], a["k"], mask=a["mask"])
    assert np.isnan(w[[0, 2]]).all() and (w[1] == 0).all()
