"""The walkthrough shows soft-capping, a bias and a sink when a trace has them: every number
in the softmax table equals float64 math written out here, and a trace without them is told as
before. Also ALiBi's bias (``masks.alibi``) by hand and the scenes' three options."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import qkv
from qkv import masks
from qkv.explain.numbers import fmt
from qkv.explain.walkthrough import walkthrough

Q = np.array([[1.0, 0.0], [0.5, 2.0], [-1.0, 1.0]])  # (L=3, d=2)
K = np.array([[2.0, 1.0], [0.0, -1.0], [1.0, 3.0]])
V = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])


def softmax_section(trace, i, head=None):
    (sec,) = [s for s in walkthrough(trace, i, head=head) if s.title.startswith("4.")]
    (table,) = [b for b in sec.blocks if hasattr(b, "rows")]
    return sec, table


def hand(i, *, cap=None, bias=None, sink=None, causal=False):
    """Row i's steps in float64, one key at a time."""
    d = Q.shape[1]
    out = {"score": [], "tempered": [], "capped": [], "biased": [], "masked": []}
    for j in range(K.shape[0]):
        s = sum(Q[i, c] * K[j, c] for c in range(d))
        t = s / math.sqrt(d)
        c = t if cap is None else cap * math.tanh(t / cap)
        b = c if bias is None else c + bias[i][j]
        out["score"].append(s), out["tempered"].append(t), out["capped"].append(c)
        out["biased"].append(b)
        out["masked"].append(-math.inf if causal and j > i else b)
    top = max([m for m in out["masked"] if m > -math.inf] + ([sink] if sink is not None else []))
    e = [math.exp(m - top) if m > -math.inf else 0.0 for m in out["masked"]]
    e_sink = math.exp(sink - top) if sink is not None else 0.0
    out["weights"] = [x / (sum(e) + e_sink) for x in e]
    out["sink"] = e_sink / (sum(e) + e_sink)
    out["e"], out["e_sink"] = e, e_sink
    return out


def column(table, name):
    k = table.columns.index(name)
    return [row[k] for row in table.rows]


def test_softcap_bias_and_sink_columns_equal_float64_by_hand():
    bias = [[0.5, -1.0, 0.25], [0.0, 1.5, -0.5], [-2.0, 0.0, 1.0]]
    _, tr = qkv.attention(
        Q,
        K,
        V,
        softcap=1.5,
        bias=np.array(bias),
        sinks=np.array(0.3),
        causal=True,
        return_trace=True,
    )
    want = hand(1, cap=1.5, bias=bias, sink=0.3, causal=True)
    sec, table = softmax_section(tr, 1)
    assert (
        sec.title == "4. scaled → tempered → capped → biased → masked → weights (softmax "
        "with a sink)"
    )
    assert table.columns == (
        "key",
        "score",
        "scaled",
        "tempered",
        "capped",
        "bias",
        "biased",
        "masked",
        "e^(m−max)",
        "weight",
    )
    keys = table.rows[:3]
    assert [r[0] for r in keys] + [table.rows[3][0]] == ["0", "1", "2", "sink"]
    assert column(table, "capped")[:3] == [fmt(x) for x in want["capped"]]
    assert column(table, "bias")[:3] == [fmt(b) for b in bias[1]]
    assert column(table, "biased")[:3] == [fmt(x) for x in want["biased"]]
    assert column(table, "masked") == [fmt(x) for x in want["masked"]] + ["0.30"]
    assert column(table, "e^(m−max)") == [fmt(x, 3) for x in want["e"]] + [fmt(want["e_sink"], 3)]
    assert column(table, "weight") == [fmt(x, 3) for x in want["weights"]] + [fmt(want["sink"], 3)]
    text = "\n".join(str(b) for b in sec.blocks)
    assert "capped = cap·tanh(tempered ÷ cap) = 1.500·tanh(tempered ÷ 1.500)" in text
    assert "biased = capped + bias" in text
    assert f"and with the sink's {fmt(want['sink'], 3)}: 1.000" in text


def test_a_row_that_sees_no_key_gives_the_sink_everything():
    mask = np.array([[False, False, False], [True, True, True], [True, True, True]])
    _, tr = qkv.attention(Q, K, V, mask=mask, sinks=np.array(-0.5), return_trace=True)
    sec, table = softmax_section(tr, 0)
    assert table.rows[-1][0] == "sink" and table.rows[-1][-1] == "1.000"
    assert any("the sink takes all the weight" in str(b) for b in sec.blocks)


def test_each_head_shows_its_own_sink_logit():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(2, 3, 4)) for _ in range(3))
    _, tr = qkv.attention(q, k, v, sinks=np.array([0.7, -1.2]), return_trace=True)
    for h, logit in enumerate((0.7, -1.2)):
        _, table = softmax_section(tr, 2, head=h)
        assert table.rows[-1][column_index(table, "masked")] == fmt(logit)
        assert table.rows[-1][-1] == fmt(float(tr["sink"][h, 2, 0]), 3)


def column_index(table, name):
    return table.columns.index(name)


def test_without_the_optional_steps_the_table_is_unchanged():
    _, tr = qkv.attention(Q, K, V, causal=True, return_trace=True)
    sec, table = softmax_section(tr, 2)
    assert sec.title == "4. scaled → tempered → masked → weights (softmax)"
    assert table.columns == ("key", "score", "scaled", "tempered", "masked", "e^(m−max)", "weight")
    formula = [s for s in walkthrough(tr, 2) if s.title == "formula"][0]
    assert "softmax(mask(QKᵀ/√d_k/τ))·V" in str(formula.lines[0])


def test_the_formula_line_names_the_steps_present():
    _, tr = qkv.attention(
        Q, K, V, softcap=2.0, bias=np.zeros((3, 3)), sinks=np.array(0.0), return_trace=True
    )
    formula = [s for s in walkthrough(tr, 0) if s.title == "formula"][0]
    line = str(formula.lines[0])
    assert "softmax₊sink(mask(cap·tanh(QKᵀ/√d_k/τ ÷ cap) + B))·V" in line
    assert "cap = 2.000" in line


def test_alibi_is_minus_slope_times_distance_bottom_right():
    np.testing.assert_array_equal(
        masks.alibi(2, 4, 0.5), [[-1.0, -0.5, 0.0, -0.5], [-1.5, -1.0, -0.5, 0.0]]
    )
    np.testing.assert_array_equal(masks.alibi(3, slope=0.0), np.zeros((3, 3)))


@pytest.mark.parametrize(
    "slope, error",
    [(-0.1, ValueError), (math.inf, ValueError), ("1", TypeError), (True, TypeError)],
)
def test_alibi_refuses_a_bad_slope(slope, error):
    with pytest.raises(error, match="slope must be"):
        masks.alibi(3, 3, slope)


@pytest.mark.parametrize("name", ["cat-sat", "two-heads"])
def test_scenes_take_the_three_options(name):
    scene = qkv.presets.load(name)
    tr = scene.trace(softcap=1.0, sink=0.2, alibi=0.5, causal="bottom-right")
    L = len(scene.tokens)
    want_bias = masks.alibi(L, L, 0.5)
    capped = tr["capped"]
    np.testing.assert_allclose(capped, np.tanh(tr["tempered"]), rtol=1e-12)
    np.testing.assert_allclose(tr["biased"], capped + want_bias, rtol=1e-12)
    total = tr["weights"].sum(axis=-1, keepdims=True) + tr["sink"]
    np.testing.assert_allclose(total, 1.0, rtol=1e-12)
    assert tr.settings["sinks"] == [0.2]


@pytest.mark.parametrize("backend", ["reference", "blocked", "fused"])
def test_a_tiny_softcap_is_the_sign_limit_without_a_warning(backend):
    # cap·tanh(s / cap) → cap·sign(s) as cap → 0: s / cap overflows, tanh(±inf) = ±1
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 40, 4)) for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, tr = qkv.attention(q, k, v, softcap=1e-308, return_trace=True)
        fast = qkv.attention(q, k, v, softcap=1e-308, backend=backend)
    assert np.array_equal(tr["capped"], 1e-308 * np.sign(tr["tempered"]))
    np.testing.assert_allclose(fast, out, rtol=0, atol=1e-12)
