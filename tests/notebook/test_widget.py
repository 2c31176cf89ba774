"""qkv.show: the widget's traits rerun qkv's engine in Python; the payload holds its numbers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import qkv

pytest.importorskip("anywidget", reason="the notebook extra is not installed")

TEXT = "The bank raised its rates because inflation was high"


def weights_of(payload) -> np.ndarray:
    """The payload's weights (the JSON's −inf/NaN strings never occur in weights)."""
    return np.array(payload["trace"]["steps"]["weights"]["data"], dtype=np.float64)


def bank_reference(temperature: float) -> np.ndarray:
    """The bank scene's weights computed here, independently of the scene's own trace()."""
    sc = qkv.presets.load("bank")
    q, k = sc.x @ sc.W_Q, sc.x @ sc.W_K  # (L, d)
    return qkv.attention_weights(q, k, temperature=temperature)


def test_import_qkv_does_not_import_anywidget():
    code = "import sys, qkv; assert callable(qkv.show); print('anywidget' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_setting_select_and_temperature_recomputes_with_the_engine():
    w = qkv.show(qkv.presets.load("bank"), select="bank")
    assert w.select == 4 and w.temperature == 1.0
    np.testing.assert_allclose(weights_of(w.payload), bank_reference(1.0), rtol=1e-12)
    w.temperature = 0.3
    assert w.payload["settings"]["temperature"] == 0.3
    np.testing.assert_allclose(weights_of(w.payload), bank_reference(0.3), rtol=1e-12)
    w.select = 6
    sel = w.payload["selected"]
    assert sel["index"] == 6 and w.payload["settings"]["select"] == 6
    ref = bank_reference(0.3)[6]
    np.testing.assert_allclose(sel["weights_sum"], 1.0, rtol=1e-12)
    # each key's term w_j·v_j of the new query, against weights and v computed here
    sc = qkv.presets.load("bank")
    np.testing.assert_allclose(sel["contributions"], ref[:, None] * (sc.x @ sc.W_V), rtol=1e-12)
    assert w.payload["walkthrough"][0]["lines"][-1].startswith("selected query: deposit")


def test_head_of_a_multi_head_scene():
    sc = qkv.presets.load("two-heads")
    w = qkv.show(sc, temperature=2.0)
    w.head = 1
    assert w.payload["settings"]["head"] == 1 and w.payload["selected"]["head"] == 1
    mha = qkv.MultiHeadAttention.from_weights(sc.W_Q, sc.W_K, sc.W_V, sc.W_O, sc.b_O)
    _, ref = mha(sc.x, temperature=2.0, return_trace=True)
    np.testing.assert_allclose(weights_of(w.payload), ref.weights, rtol=1e-12)
    i = w.select
    np.testing.assert_allclose(
        w.payload["selected"]["contributions"], ref.contributions(i, head=1), rtol=1e-12
    )


def test_values_the_view_cannot_show_are_refused_with_the_range():
    import traitlets

    w = qkv.show(qkv.presets.load("bank"))
    with pytest.raises(
        traitlets.TraitError, match=r"select must be a token index in \[0, 8\), got 8"
    ):
        w.select = 8
    with pytest.raises(traitlets.TraitError, match="temperature must be a finite number > 0"):
        w.temperature = 0.0
    with pytest.raises(traitlets.TraitError, match=r"head must be in \[0, 1\), got 1"):
        w.head = 1
    assert w.select == 4  # unchanged


def test_a_one_head_trace_is_rerun_from_its_q_k_v(rng):
    q, k, v = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 7))
    _, tr = qkv.attention(q, k, v, causal=True, return_trace=True)
    w = qkv.show(tr)
    assert w.select == 4 and w.info["words"].startswith("5 queries × 5 keys, d_k = 3, d_v = 7")
    w.temperature = 0.5
    ref = qkv.attention_weights(q, k, causal=True, temperature=0.5)
    np.testing.assert_allclose(weights_of(w.payload), ref, rtol=1e-12)
    assert w.payload["trace"]["settings"]["causal"] == "bottom-right"


def test_a_multi_head_trace_keeps_its_temperature(rng):
    sc = qkv.presets.load("two-heads")
    w = qkv.show(sc.trace())
    assert w.info["tau"]["fixed"] == 1.0 and "W_O" in w.info["tau"]["why"]
    import traitlets

    with pytest.raises(traitlets.TraitError, match="fixed at 1.0"):
        w.temperature = 2.0


def test_show_refuses_what_it_cannot_draw(rng):
    x = rng.normal(size=(3, 2, 4, 3))  # (batch, heads, L, d)
    _, batch = qkv.attention(x, x, x, return_trace=True)
    with pytest.raises(ValueError, match=r"one sequence.*\(3, 2, 4, 4\)"):
        qkv.show(batch)
    _, cross = qkv.attention(x[0, 0, :2], x[0, 0], x[0, 0], return_trace=True)
    with pytest.raises(ValueError, match="L = 2 queries × S = 4 keys"):
        qkv.show(cross)
    with pytest.raises(TypeError, match="got ndarray"):
        qkv.show(x)


def test_model_run_layer_and_head(minilm):
    run = minilm.trace(TEXT)
    w = qkv.show(run)
    assert w.info["layers"] == list(range(6)) and w.info["n_heads"] == 12
    assert w.info["grid"]["shape"] == [6, 12, len(run.tokens), len(run.tokens)]
    w.layer, w.head = 3, 7
    np.testing.assert_allclose(weights_of(w.payload), run.layer(3).weights[7], rtol=0, atol=0)
    # another τ: the head rerun from its q, k (after the model's projections) by qkv.attention
    w.temperature = 0.5
    tr = run.layer(3)
    ref = qkv.attention_weights(
        tr.q[7].astype(np.float64),
        tr.k[7].astype(np.float64),
        scale=tr.settings["scale"],
        temperature=0.5,
    )
    np.testing.assert_allclose(weights_of(w.payload), ref, rtol=2e-5, atol=1e-6)
