import json

import numpy as np
import pytest

import qkv
from qkv import Trace


def _equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def test_json_round_trip_is_exact_with_inf_and_nan(rng):
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    q[0, 0, 0] = np.nan
    mask = np.ones((3, 5), bool)
    mask[1] = False
    _, tr = qkv.attention(q.astype(np.float32), k, v, mask=mask, causal=True, return_trace=True)
    text = tr.to_json()
    json.loads(text)  # strict JSON: no bare NaN/Infinity tokens
    back = Trace.from_json(text)
    assert back.names == tr.names and back.settings.keys() == tr.settings.keys()
    for name in tr.names:
        assert _equal(back[name], tr[name]), name
    assert np.array_equal(back.settings["mask"], tr.settings["mask"])
    assert np.isneginf(back.masked).any() and np.isnan(back.weights).any()
    assert back.to_json() == text


def test_attribute_and_item_access_and_unknown_steps(rng):
    _, tr = qkv.attention(np.eye(2), np.eye(2), np.eye(2), return_trace=True)
    assert tr.weights is tr["weights"]
    with pytest.raises(KeyError, match="head_out"):
        tr["head_out"]
    with pytest.raises(AttributeError, match="head_out"):
        tr.head_out
    with pytest.raises(ValueError, match="unknown step names"):
        Trace({"attn": np.eye(2)}, {})


def test_contributions_sum_to_z_single_and_multi_head(rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    _, tr = qkv.attention(q, k, v, return_trace=True)
    terms = tr.contributions(1)
    assert terms.shape == (5, 2)
    assert np.allclose(terms, tr.weights[1][:, None] * v)
    assert np.allclose(terms.sum(axis=0), tr.z[1])

    mha = qkv.MultiHeadAttention(12, 6, seed=0, n_kv_heads=2)
    _, tr = mha(rng.normal(size=(4, 12)), return_trace=True)
    for h in range(6):
        terms = tr.contributions(2, head=h)
        assert terms.shape == (4, 2)
        assert np.allclose(terms.sum(axis=0), tr.z[h, 2])
        assert np.allclose(terms[3], tr.weights[h, 2, 3] * tr.v[h // 3, 3])


def test_contributions_argument_errors(rng):
    _, tr = qkv.attention(np.eye(3), np.eye(3), np.eye(3), return_trace=True)
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        tr.contributions(3)
    with pytest.raises(ValueError, match="no head axis"):
        tr.contributions(0, head=0)


def test_html_is_self_contained_and_shows_weights():
    scene = qkv.explain.scenes.load("cat-sat")
    page = scene.trace()._repr_html_()
    assert "<script" not in page and "http" not in page
    assert "sat" in page and "weights" in page
    w = scene.trace().weights
    assert f"{w[2, 2]:.2f}" in page


def test_from_json_refuses_other_formats():
    with pytest.raises(ValueError, match="qkv.trace/1"):
        Trace.from_json('{"format": "other"}')


def test_torch_trace_serialises(rng):
    torch = pytest.importorskip("torch")
    q = torch.tensor(rng.normal(size=(2, 3)), requires_grad=True)
    _, tr = qkv.attention(q, q, q, return_trace=True)
    back = Trace.from_json(tr.to_json())
    assert np.allclose(back.weights, tr.weights.detach().numpy(), rtol=0, atol=0)


def _small_trace():
    q = np.array([[1.0, 0.0], [0.0, 2.0]])
    return qkv.attention(q, q, q, causal=True, return_trace=True)[1]


def _with(**changes):
    d = json.loads(_small_trace().to_json())
    for path, value in changes.items():
        node, *keys = path.split("__")
        target = d[node]
        for key in keys[:-1]:
            target = target[key]
        if keys:
            target[keys[-1]] = value
        else:
            d[node] = value
    return json.dumps(d)


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"steps__weights__dtype": "V2000000000"}, "steps.weights.dtype"),
        ({"steps__weights__dtype": "object"}, "steps.weights.dtype"),
        ({"steps__weights__dtype": "complex128"}, "steps.weights.dtype"),
        ({"mask__dtype": "int8"}, "mask.dtype"),
        ({"steps__z__shape": [100000, 100000]}, "steps.z.shape"),
        ({"steps__z__shape": [1] * 9}, "steps.z.shape"),
        ({"steps__z__shape": [2, -2]}, "steps.z.shape"),
        ({"steps__z__shape": [3, 2]}, "steps.z.data"),
        ({"steps__z__data": [[1.0, "1e5"], [0.0, 1.0]]}, "steps.z.data"),
        ({"steps__z__data": [[1.0, None], [0.0, 1.0]]}, "steps.z.data"),
        ({"mask__data": [[1, 0], [1, 1]]}, "mask.data"),
        ({"steps__z": [1, 2]}, "steps.z"),
        ({"steps": []}, "steps"),
        ({"settings": "x"}, "settings"),
        ({"tokens": [1, 2]}, "tokens"),
        ({"steps__attn": {"dtype": "float64", "shape": [], "data": 1.0}}, "steps"),
    ],
)
def test_from_json_names_the_bad_field_and_allocates_nothing_big(changes, field):
    with pytest.raises(ValueError, match=rf"^{field.replace('.', '[.]')}\b"):
        Trace.from_json(_with(**changes))


def test_from_json_refuses_deep_nesting_and_a_total_past_the_limit(monkeypatch):
    with pytest.raises(ValueError, match="nested too deeply"):
        Trace.from_json("[" * 100000 + "]" * 100000)
    monkeypatch.setattr("qkv.trace.MAX_ELEMENTS", 10)  # the small trace has ~30 numbers
    with pytest.raises(ValueError, match=r"steps\.\w+\.shape: .* more than the 10"):
        Trace.from_json(_small_trace().to_json())


def test_traces_compare_by_their_arrays():
    a, b = _small_trace(), _small_trace()
    assert a == b and a == Trace.from_json(a.to_json())
    b.steps["z"] = b.z + 1e-12
    assert a != b
    assert a != Trace(dict(a.steps), {**a.settings, "mask": None})
    assert (a == "trace") is False
    nan = Trace({"z": np.array([np.nan])}, {})
    assert nan == Trace({"z": np.array([np.nan])}, {})
    assert nan != Trace({"z": np.array([np.nan], np.float32)}, {})
