"""One contract, every backend: a table of hostile inputs, each with the documented result
(against float64 math written out row by row here) or the documented error.

The backends come from the code (``dispatch.BACKENDS`` minus "auto"), so a new kernel joins
this table by being listed there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest

import qkv
from qkv.kernels import dispatch, tuning

try:
    import torch
except ImportError:  # the NumPy half of the contract runs without torch
    torch = None

NEEDS_TORCH = pytest.mark.skipif(
    torch is None, reason="torch is not installed: pip install 'qkv[torch]'"
)
BACKENDS = [b for b in dispatch.BACKENDS if b != "auto"]
# The tile kernels run every test again under tiles much smaller than the inputs, so each case
# crosses tile edges and the causal diagonal: whatever tiles the tuner picks on a machine
# (kernels/tuning.py), the answer is the contract's.
FORCED_TILES = [tuning.Tiles(2, 3), tuning.Tiles(5, 2)]
RUNS = [
    pytest.param((b, None), id=b, marks=NEEDS_TORCH if b == "torch" else ()) for b in BACKENDS
] + [
    pytest.param((b, tiles), id=f"{b}-tiles{tiles.block_q}x{tiles.block_k}")
    for tiles in FORCED_TILES
    for b in ("blocked", "fused")
    if b in BACKENDS
]


@pytest.fixture
def backend(request):
    """The backend's name, with its tiles forced for the test when the run names some."""
    name, tiles = request.param
    with tuning.forced(tiles):
        yield name


def oracle(
    q,
    k,
    v,
    *,
    mask=None,
    causal=False,
    scale=None,
    temperature=1.0,
    softcap=None,
    bias=None,
    sinks=None,
):
    """The README's conventions in float64, one row at a time over the keys the row sees:
    tempered → cap·tanh(·/cap) → + bias → softmax whose denominator also holds e^sink (the
    row's head's sink logit), which adds no value."""
    q, k, v = (_f64(a) for a in (q, k, v))
    heads = q.shape[-3] if q.ndim >= 3 else 1
    sink_of = None if sinks is None else np.broadcast_to(_f64(sinks).reshape(-1), (heads,))
    if q.ndim >= 3 and k.ndim >= 3 and q.shape[-3] != k.shape[-3]:  # grouped K/V heads
        r = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, r, axis=-3), np.repeat(v, r, axis=-3)
    L, S, d_k, d_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (np.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))
    b = np.zeros(lead + (L, S)) if bias is None else np.broadcast_to(_f64(bias), lead + (L, S))
    seen = np.ones(lead + (L, S), bool)
    if mask is not None:
        seen = seen & _f64(mask).astype(bool)
    if causal:
        offset = S - L if causal in (True, "bottom-right") else 0
        seen = seen & (np.arange(S)[None, :] <= np.arange(L)[:, None] + offset)
    c = (1 / math.sqrt(d_k) if d_k else 1.0) if scale is None else scale
    out = np.zeros(lead + (L, d_v))
    for idx in np.ndindex(*lead):
        sink = None if sinks is None else sink_of[idx[-1] % heads if idx else 0]
        for i in range(L):
            keys = np.flatnonzero(seen[idx][i])
            if not len(keys):
                continue  # sees no key: 0 (with a sink too: it takes all the weight)
            with np.errstate(invalid="ignore", over="ignore"):
                s = np.array([q[idx][i] @ k[idx][j] for j in keys]) * c / temperature
                if softcap is not None:
                    s = softcap * np.tanh(s / softcap)
                s = s + b[idx][i][keys]
            vs = v[idx][keys]
            if (
                np.isnan(s).any()
                or (s == np.inf).any()
                or not np.isfinite(vs).all()
                or sink is None
                and (s == -np.inf).all()
            ):
                out[idx][i] = np.nan
                continue
            top = s.max() if sink is None else max(s.max(), sink)
            e = np.exp(s - top)
            total = e.sum() + (0.0 if sink is None else math.exp(sink - top))
            out[idx][i] = (e / total) @ vs
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

    @property
    def param(self):
        """The case as a test parameter; cases of torch tensors skip without torch."""
        return pytest.param(self, id=self.name, marks=NEEDS_TORCH if "tensors" in self.name else ())


def _qkv(rng, L=3, S=5, d_k=4, d_v=2, lead=(), dtype=np.float64):
    return {
        "q": rng.normal(size=(*lead, L, d_k)).astype(dtype),
        "k": rng.normal(size=(*lead, S, d_k)).astype(dtype),
        "v": rng.normal(size=(*lead, S, d_v)).astype(dtype),
    }


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


def _steps(rng, a, *, softcap=None, bias=None, sinks=False):
    """a (q, k, v, ...) with the optional steps: softcap, a bias of shape ``bias`` in q's
    dtype, one sink logit per query head."""
    a = dict(a)
    q = a["q"]
    torch_in = hasattr(q, "detach")
    if softcap is not None:
        a["softcap"] = softcap
    if bias is not None:
        b = rng.normal(size=bias) * 2
        a["bias"] = torch.tensor(b, dtype=q.dtype) if torch_in else b.astype(q.dtype)
    if sinks:
        logits = rng.normal(size=q.shape[-3] if q.ndim >= 3 else 1) + 1.0
        a["sinks"] = torch.tensor(logits, dtype=q.dtype) if torch_in else logits
    return a


ALL3 = {"softcap": 1.5, "sinks": True}


def _all3(rng, lead=(2, 3), L=3, S=5, dtype=np.float64, bias=None, **kwargs):
    """q, k, v (lead, L/S, ...) with softcap, a bias (default (L, S)) and sinks."""
    a = _qkv(rng, L=L, S=S, lead=lead, dtype=dtype)
    return {**_steps(rng, a, bias=bias or (L, S), **ALL3), **kwargs}


def _garbage_with_steps(rng):
    """Masked garbage, now also in the bias: NaN/inf in k, v and bias at hidden keys."""
    a = _steps(rng, _masked_garbage(rng), bias=(3, 5), **ALL3)
    a["bias"] = _set(_set(a["bias"], (0, 1), np.nan), (2, 3), np.inf)
    return a


def _tensor_heads(rng, dtype, **steps):
    a = {name: torch.tensor(x, dtype=dtype) for name, x in _qkv(rng, L=6, S=7, lead=(2, 3)).items()}
    return _steps(rng, a, **steps)


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
    Case(
        "L > S causal bottom-right (first rows see nothing)",
        lambda rng: {**_qkv(rng, L=6, S=3), "causal": True},
    ),
    Case("L > S causal top-left", lambda rng: {**_qkv(rng, L=6, S=3), "causal": "top-left"}),
    Case("all-masked row", lambda rng: {**_qkv(rng), "mask": _row_mask(3, 5, dead_row=1)}),
    Case(
        "all-masked row with a NaN query",
        lambda rng: {
            **(a := _qkv(rng)),
            "q": _set(a["q"], 1, np.nan),
            "mask": _row_mask(3, 5, dead_row=1),
        },
    ),
    Case("every row masked", lambda rng: {**_qkv(rng), "mask": np.zeros((3, 5), bool)}),
    Case(
        "-1e9 float mask",
        lambda rng: {**_qkv(rng), "mask": np.where(_row_mask(3, 5, hidden_key=2), 0.0, -1e9)},
        (TypeError, "mask must be boolean"),
    ),
    Case(
        "mask of the wrong shape",
        lambda rng: {**_qkv(rng), "mask": np.ones((3, 4), bool)},
        (ValueError, r"mask must broadcast .* \(3, 5\)"),
    ),
    Case(
        "d_k mismatch",
        lambda rng: {**_qkv(rng), "k": np.ones((5, 3))},
        (ValueError, r"same last dimension d_k.*\(3, 4\).*\(5, 3\)"),
    ),
    Case(
        "non-contiguous views",
        lambda rng: {
            name: a[..., ::2, :] if name == "q" else a[:, ::-1][:, ::-1]
            for name, a in _qkv(rng, L=6, lead=(2,)).items()
        },
    ),
    Case(
        "transposed (Fortran-order) inputs",
        lambda rng: {name: np.asfortranarray(a) for name, a in _qkv(rng).items()},
    ),
    Case("negative strides", lambda rng: {name: a[::-1] for name, a in _qkv(rng).items()}),
    Case(
        "negative strides, float32, masked",
        lambda rng: {
            **{name: a[..., ::-1, :] for name, a in _qkv(rng, dtype=np.float32).items()},
            "mask": _row_mask(3, 5, hidden_key=4)[::-1],
        },
    ),
    Case("0 heads", lambda rng: _qkv(rng, lead=(0,))),
    Case("0 batch, 2 heads", lambda rng: _qkv(rng, lead=(0, 2))),
    Case("d_v = 0", lambda rng: _qkv(rng, d_v=0)),
    Case("d_k = 0 (uniform weights)", lambda rng: _qkv(rng, d_k=0)),
    Case(
        "integer inputs",
        lambda rng: {name: np.round(a * 3).astype(np.int64) for name, a in _qkv(rng).items()},
    ),
    Case("bool inputs", lambda rng: {name: a > 0 for name, a in _qkv(rng).items()}),
    Case(
        "float16",
        lambda rng: {
            name: a * 4
            for name, a in _qkv(rng, L=64, S=64, d_k=64, d_v=64, dtype=np.float16).items()
        },
    ),
    Case(
        "float16 causal",
        lambda rng: {
            **{
                name: a * 4
                for name, a in _qkv(rng, L=64, S=64, d_k=48, d_v=64, dtype=np.float16).items()
            },
            "causal": True,
            "temperature": 0.7,
        },
    ),  # scale/τ not a power of 2: q·(scale/τ) would round in float16
    Case("bfloat16 tensors", lambda rng: _tensors(rng, torch.bfloat16)),
    Case("float64 tensors, causal", lambda rng: {**_tensors(rng, torch.float64), "causal": True}),
    Case("huge scale (the argmax)", lambda rng: {**_qkv(rng), "scale": 1e30}),
    Case("tiny scale (uniform)", lambda rng: {**_qkv(rng), "scale": 1e-30}),
    Case(
        "tiny τ = 1e-30, float32 (the argmax)",
        lambda rng: {**_qkv(rng, dtype=np.float32), "temperature": 1e-30},
    ),
    Case(
        "tiny τ, tied keys share the weight",
        lambda rng: {**(a := _qkv(rng)), "k": _set(a["k"], 3, a["k"][1]), "temperature": 1e-30},
    ),
    Case("huge τ (uniform)", lambda rng: {**_qkv(rng, dtype=np.float32), "temperature": 1e30}),
    Case(
        "τ = 1e-310 overflows float64",
        lambda rng: {**_qkv(rng), "temperature": 1e-310},
        (ValueError, r"temperature 1e-310 is too small.*overflows float64"),
    ),
    Case(
        "|q·k| ~ 1e40 overflows float32",
        lambda rng: {
            name: a * 1e20 if name in "qk" else a for name, a in _qkv(rng, dtype=np.float32).items()
        },
        (ValueError, r"scores overflow float32.*larger τ"),
    ),
    Case(
        "scores overflow to −inf everywhere in float32",
        lambda rng: {
            **(a := _qkv(rng, dtype=np.float32)),
            "q": np.abs(a["q"]) * 1e20,
            "k": -np.abs(a["k"]) * 1e20 - 1e20,
        },
        (ValueError, r"scores overflow float32"),
    ),
    Case("NaN/inf in k and v of masked keys", _masked_garbage),
    Case(
        "NaN/inf in the last key, which causal hides from all but the last row",
        lambda rng: {
            **(a := _qkv(rng, L=5, S=5)),
            "k": _set(a["k"], 4, np.nan),
            "v": _set(a["v"], 4, np.inf),
            "causal": True,
        },
    ),
    Case(
        "NaN in a query (its row is NaN)",
        lambda rng: {**(a := _qkv(rng)), "q": _set(a["q"], (1, 2), np.nan)},
    ),
    Case(
        "NaN in a visible key (rows that see it are NaN)",
        lambda rng: {
            **(a := _qkv(rng, L=5, S=5)),
            "k": _set(a["k"], (2, 0), np.nan),
            "causal": True,
        },
    ),
    Case(
        "inf in a visible value (rows that see it are NaN)",
        lambda rng: {
            **(a := _qkv(rng, L=5, S=5)),
            "v": _set(a["v"], (3, 1), np.inf),
            "causal": True,
        },
    ),
    Case(
        "+inf in a visible key",
        lambda rng: {**(a := _qkv(rng)), "q": np.abs(a["q"]) + 0.1, "k": _set(a["k"], 0, np.inf)},
    ),
    Case("−inf score at a visible key (weight 0)", _visible_neg_inf_key),
    Case("every visible score −inf (NaN)", _all_neg_inf),
    Case(
        "5-D inputs with a 4-D mask",
        lambda rng: {**_qkv(rng, lead=(2, 3, 2)), "mask": rng.random((3, 2, 3, 5)) > 0.3},
    ),
    Case(
        "grouped K/V heads with a mask",
        lambda rng: {
            "q": rng.normal(size=(4, 3, 4)),
            "k": rng.normal(size=(2, 5, 4)),
            "v": rng.normal(size=(2, 5, 3)),
            "mask": rng.random((3, 5)) > 0.4,
        },
    ),
    Case(
        "one decoding row against a long cache",
        lambda rng: {**_qkv(rng, L=1, S=700, d_k=8, d_v=4, lead=(3,)), "causal": True},
    ),
    Case(
        "a large problem (tiles, threads)",
        lambda rng: {
            **_qkv(rng, L=300, S=600, d_k=8, d_v=4, lead=(2,), dtype=np.float32),
            "causal": True,
        },
    ),
    Case("softcap", lambda rng: _steps(rng, _qkv(rng, lead=(2,)), softcap=1.5)),
    Case(
        "softcap, float32, huge scores (tanh saturates)",
        lambda rng: _steps(
            rng,
            {n: a * (30 if n in "qk" else 1) for n, a in _qkv(rng, dtype=np.float32).items()},
            softcap=5.0,
        ),
    ),
    Case(
        "bias (L, S) over (B, H, L, S) inputs",
        lambda rng: _steps(rng, _qkv(rng, lead=(2, 3)), bias=(3, 5)),
    ),
    Case(
        "bias (H, 1, S), float32",
        lambda rng: _steps(rng, _qkv(rng, lead=(2, 3), dtype=np.float32), bias=(3, 1, 5)),
    ),
    Case(
        "bias (B, H, L, S), causal",
        lambda rng: {**_steps(rng, _qkv(rng, lead=(2, 3)), bias=(2, 3, 3, 5)), "causal": True},
    ),
    Case(
        "bias −inf at some visible keys (weight 0)",
        lambda rng: {
            **(a := _steps(rng, _qkv(rng), bias=(3, 5))),
            "bias": _set(a["bias"], (slice(None), 2), -np.inf),
        },
    ),
    Case("sinks", lambda rng: _steps(rng, _qkv(rng, lead=(2, 3)), sinks=True)),
    Case("sinks, no head axis", lambda rng: _steps(rng, _qkv(rng), sinks=True)),
    Case("all three", lambda rng: _all3(rng)),
    Case("all three, float32", lambda rng: _all3(rng, dtype=np.float32)),
    Case("all three, causal", lambda rng: _all3(rng, L=5, S=5, causal=True)),
    Case("all three, L < S causal bottom-right", lambda rng: _all3(rng, L=3, S=6, causal=True)),
    Case(
        "all three, L > S causal (first rows see nothing: z = 0)",
        lambda rng: _all3(rng, L=6, S=3, causal=True),
    ),
    Case(
        "all three, a mask with an all-masked row (the sink takes it all: z = 0)",
        lambda rng: _all3(rng, mask=_row_mask(3, 5, dead_row=1, hidden_key=3)),
    ),
    Case(
        "sinks, every row masked (z = 0)",
        lambda rng: {
            **_steps(rng, _qkv(rng, lead=(2,)), sinks=True),
            "mask": np.zeros((3, 5), bool),
        },
    ),
    Case(
        "sinks, every visible score −inf (the sink takes it all: z = 0)",
        lambda rng: _steps(rng, _all_neg_inf(rng), sinks=True),
    ),
    Case(
        "sinks, a NaN query (its row is NaN)",
        lambda rng: {
            **(a := _steps(rng, _qkv(rng, lead=(2,)), sinks=True)),
            "q": _set(a["q"], (1, 1, 0), np.nan),
        },
    ),
    Case(
        "a sink of −inf (as if none; the reference decides)",
        lambda rng: {
            **_qkv(rng, lead=(2,)),
            "sinks": np.array([-np.inf, 0.5]),
            "mask": _row_mask(3, 5, hidden_key=0),
        },
    ),
    Case(
        "all three, grouped K/V heads, bias (H, 1, S)",
        lambda rng: {
            **_steps(
                rng,
                {
                    "q": rng.normal(size=(4, 3, 4)),
                    "k": rng.normal(size=(2, 5, 4)),
                    "v": rng.normal(size=(2, 5, 3)),
                },
                bias=(4, 1, 5),
                **ALL3,
            ),
            "mask": rng.random((3, 5)) > 0.4,
        },
    ),
    Case("all three, NaN/inf in k, v and bias of masked keys", _garbage_with_steps),
    Case(
        "all three, one decoding row against a long cache",
        lambda rng: _all3(rng, lead=(3,), L=1, S=700, causal=True),
    ),
    Case(
        "all three, a large problem (tiles, threads), float32",
        lambda rng: _all3(rng, lead=(2,), L=300, S=600, dtype=np.float32, causal=True),
    ),
    Case(
        "bias and sinks, float64 tensors, causal",
        lambda rng: {**_tensor_heads(rng, torch.float64, bias=(6, 7), sinks=True), "causal": True},
    ),
    Case(
        "bias and sinks, bfloat16 tensors, a mask",
        lambda rng: {
            **_tensor_heads(rng, torch.bfloat16, bias=(3, 1, 7), sinks=True),
            "mask": torch.tensor(_row_mask(6, 7, dead_row=2, hidden_key=0)),
        },
    ),
    Case(
        "all three, float32 tensors (softcap: the reference runs in torch)",
        lambda rng: _tensor_heads(rng, torch.float32, softcap=2.0, bias=(6, 7), sinks=True),
    ),
    Case(
        "bias of the wrong shape",
        lambda rng: _steps(rng, _qkv(rng), bias=(3, 4)),
        (
            ValueError,
            r"bias must broadcast to the scores' shape \(\.\.\., L, S\) = \(3, 5\), "
            r"got shape \(3, 4\)",
        ),
    ),
    Case(
        "a boolean bias",
        lambda rng: {**_qkv(rng), "bias": np.ones((3, 5), bool)},
        (TypeError, r"bias must be a real floating array .* got dtype bool"),
    ),
    Case(
        "sinks of the wrong shape",
        lambda rng: {**_qkv(rng, lead=(2, 3)), "sinks": np.zeros(2)},
        (
            ValueError,
            r"sinks must hold one logit per query head, shape \(3,\), for q of "
            r"shape \(2, 3, 3, 4\); got shape \(2,\)",
        ),
    ),
    Case(
        "softcap = 0",
        lambda rng: {**_qkv(rng), "softcap": 0.0},
        (ValueError, r"softcap must be a finite number > 0 \(or None: no capping\), got 0.0"),
    ),
    Case(
        "softcap < 0, tensors",
        lambda rng: {**_tensors(rng, torch.float32), "softcap": -1},
        (ValueError, r"softcap must be a finite number > 0 \(or None: no capping\), got -1"),
    ),
]


def _tolerance(dtype, v):
    """(rtol, atol): the output's own rounding (float16/bfloat16 keep 11/8 bits) on top of a
    float32/float64 computation; atol in units of the largest finite |v|."""
    v = np.abs(_f64(v))
    scale = float(v[np.isfinite(v)].max(initial=1.0))
    rtol, atol = {
        "float64": (0, 1e-12),
        "float32": (0, 1e-5),
        "float16": (1e-3, 1e-4),
        "bfloat16": (8e-3, 1e-3),
    }[str(dtype).removeprefix("torch.")]
    return rtol, atol * scale


@pytest.mark.parametrize("backend", RUNS, indirect=True)
@pytest.mark.parametrize("case", [c.param for c in CASES])
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


@pytest.mark.parametrize("backend", RUNS, indirect=True)
def test_masked_garbage_gives_what_deleting_the_keys_gives(backend):
    a = _masked_garbage(np.random.default_rng(3))
    keep = [0, 2, 4]
    out = qkv.attention(**a, backend=backend)
    deleted = qkv.attention(a["q"], a["k"][keep], a["v"][keep], backend=backend)
    np.testing.assert_allclose(out, deleted, rtol=0, atol=1e-6)


@pytest.mark.parametrize("backend", RUNS, indirect=True)
def test_weights_of_a_nan_row_and_a_dead_row(backend):
    a = _all_neg_inf(np.random.default_rng(5))
    out = qkv.attention(**a, backend=backend)
    assert np.isnan(out[[0, 2]]).all() and (out[1] == 0).all()
    w = qkv.attention_weights(a["q"], a["k"], mask=a["mask"])
    assert np.isnan(w[[0, 2]]).all() and (w[1] == 0).all()


@pytest.mark.parametrize("backend", RUNS, indirect=True)
@pytest.mark.parametrize(
    "steps", [{"bias": True, "sinks": True}, {"softcap": 1.5, "bias": True, "sinks": True}]
)
def test_masked_garbage_with_the_steps_gives_what_deleting_the_keys_gives(backend, steps):
    a = _garbage_with_steps(np.random.default_rng(3))
    if "softcap" not in steps:
        del a["softcap"]
    keep = [0, 2, 4]
    out = qkv.attention(**a, backend=backend)
    deleted = qkv.attention(
        a["q"],
        a["k"][keep],
        a["v"][keep],
        bias=a["bias"][:, keep],
        sinks=a["sinks"],
        softcap=a.get("softcap"),
        backend=backend,
    )
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, deleted, rtol=0, atol=1e-6)


ERRORS = [c for c in CASES if c.error is not None]


@pytest.mark.parametrize("case", [c.param for c in ERRORS])
def test_every_backend_gives_the_same_error_message(case):
    kwargs = case.make(np.random.default_rng(7))
    messages = set()
    for backend in (b for b in dispatch.BACKENDS if b != "torch" or torch is not None):
        with pytest.raises(case.error[0]) as e:
            qkv.attention(**kwargs, backend=backend)
        messages.add(str(e.value))
    assert len(messages) == 1, messages


@NEEDS_TORCH
def test_softcap_on_torch_runs_the_reference_and_the_rest_runs_a_kernel():
    from qkv.checks import problem
    from qkv.kernels import fused

    rng = np.random.default_rng(1)
    big = _qkv(rng, L=200, S=200, lead=(2,))
    t = {name: torch.tensor(a) for name, a in big.items()}
    for steps in ({"softcap": 2.0}, {"bias": np.zeros((200, 200))}, {"sinks": np.ones(2)}):
        numpy_kernel = "fused" if fused.available() else "blocked"
        assert dispatch.choose("auto", problem(**big, **steps)) == numpy_kernel
        assert dispatch.choose("blocked", problem(**big, **steps)) == "blocked"
        torch_kernel = "reference" if "softcap" in steps else "torch"
        assert dispatch.choose("auto", problem(**t, **steps)) == torch_kernel
        assert dispatch.choose("torch", problem(**t, **steps)) == torch_kernel
        assert dispatch.choose("torch", problem(**big, **steps)) == torch_kernel
    # the documented fallback gives the reference's numbers, not an error
    out = qkv.attention(**t, softcap=2.0, backend="torch")
    want = qkv.attention(**t, softcap=2.0, backend="reference")
    assert torch.equal(out, want)
