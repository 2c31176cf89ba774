"""The lab's experiments against closed forms, and the Mini-GPT against qkv's NumPy attention."""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from qkv import steps
from qkv.lab import corpus, minigpt, scaling, symmetry, temperature


def test_scaling_spread_matches_sqrt_d_and_saturates_without_scaling():
    r = scaling.run(seed=3)
    a = np.array(r.rows, dtype=float)
    # the closed form: for q, k ~ N(0, I_d), Var(q·k) = d, so std = √d
    assert np.allclose(a[:, 2], np.sqrt(a[:, 0]), rtol=0.08)
    assert np.allclose(a[:, 3], 1.0, atol=0.08)
    assert a[-1, 4] > 0.9 and a[-1, 7] < 0.1  # raw max weight saturates, scaled does not
    assert a[-1, 6] < 1e-6 * a[-1, 9]  # a typical key's gradient vanishes without scaling
    assert r.supported and r.verdict.startswith("SUPPORTED")


def test_score_gradients_match_torch_autograd(rng):
    torch = pytest.importorskip("torch")
    s = rng.normal(size=(3, 7))
    g = rng.normal(size=(3, 7))
    st = torch.tensor(s, requires_grad=True)
    torch.softmax(st, -1).backward(torch.tensor(g))
    assert np.allclose(scaling.score_gradients(s, g), st.grad.numpy(), atol=1e-14)


def test_symmetry_tied_is_symmetric_and_psd_separate_is_not():
    r = symmetry.run(seed=5)
    tied, separate = r.rows
    assert tied[1] < 1e-9 and tied[2] >= -1e-9 and tied[3] >= 0
    assert separate[1] > 1e-3 and separate[2] < 0
    assert r.extra["agreement"]["tied_output_is_mix_of_keys"]
    assert r.supported


def test_psd_eigenvalues_of_a_gram_matrix_are_nonnegative(rng):
    W = rng.normal(size=(9, 4))
    eig = symmetry.psd_eigenvalues(W @ W.T)
    assert eig.min() >= -1e-9 and np.sum(eig > 1e-9) == 4  # rank d_k


def test_temperature_limits_against_a_hand_softmax():
    r = temperature.run(preset="cat-sat")
    from qkv import presets

    scene = presets.load("cat-sat")
    q = scene.x @ scene.W_Q
    k = scene.x @ scene.W_K
    s = q[scene.select] @ k.T / math.sqrt(3)
    for row in (r.rows[0], r.rows[-1]):
        tau = row[0]
        e = np.exp((s - s.max()) / tau)
        assert np.allclose(row[5:], e / e.sum(), atol=1e-12)
    assert r.rows[0][1] == "sat" and r.rows[0][2] > 0.95
    assert r.rows[-1][4] > 0.95 * 6
    assert r.supported


def test_corpus_agreement_and_held_out_pairs():
    rng = np.random.default_rng(0)
    train = corpus.batch(rng, 50)
    test = corpus.batch(rng, 50, test=True)
    for b, held in ((train, False), (test, True)):
        for (s, v), subj in zip(b.verb_pos, b.subject_pos):
            pron, verb = corpus.VOCAB[b.ids[s, subj]], corpus.VOCAB[b.ids[s, v]]
            assert verb.endswith("s") == (pron in corpus.THIRD_SINGULAR)
    pairs = {(corpus.VOCAB[b_ids[s]], corpus.VOCAB[b_ids[v]].removesuffix("s"))
             for b_ids, s, v in [(train.ids[i], j, k) for (i, k), j in
                                 zip(train.verb_pos, train.subject_pos)]}
    assert not any(corpus.held_out(p, v) for p, v in pairs if v in corpus.VERBS)


@pytest.fixture(scope="module")
def short_run():
    pytest.importorskip("torch", reason="training needs torch (pip install torch==2.13.0)")
    from qkv.lab import train

    return train.train(steps=40, seed=1)


def test_short_training_reduces_the_loss(short_run):
    assert np.mean(short_run.losses[-5:]) < np.mean(short_run.losses[:5]) - 0.5
    assert len(short_run.grad_norms) == 40 and all(np.isfinite(short_run.grad_norms))


def test_torch_model_attention_equals_numpy_attention_on_the_same_weights(short_run):
    import torch

    b = corpus.batch(np.random.default_rng(9), 4)
    p_np = short_run.params
    p_t = {k: torch.tensor(v) for k, v in p_np.items()}
    lt, tt = minigpt.forward(p_t, torch.from_numpy(b.ids), short_run.config, return_traces=True)
    ln, tn = minigpt.forward(p_np, b.ids, short_run.config, return_traces=True)
    assert np.allclose(lt.numpy(), ln, atol=1e-4)
    for a, c in zip(tt, tn):
        assert np.allclose(a.weights.numpy(), c.weights, atol=1e-6)
    # and layer 0's weights equal torch's own SDPA on the same q, k
    q, k = torch.tensor(tn[0].q), torch.tensor(tn[0].k)
    T = b.ids.shape[1]
    hidden = ~torch.ones(T, T).bool().tril()
    ref = torch.softmax((q @ k.mT / 4.0).masked_fill(hidden, -torch.inf), -1)
    assert np.allclose(tn[0].weights, ref.numpy(), atol=1e-12)


def test_checkpoint_round_trip_reproduces_outputs(short_run, tmp_path):
    path = tmp_path / "m.npz"
    minigpt.save(path, short_run.params, short_run.config, {"note": 1})
    p, config, meta = minigpt.load(path)
    assert config == short_run.config and meta == {"note": 1}
    ids = corpus.batch(np.random.default_rng(2), 3).ids
    want = minigpt.forward({k: v.astype(np.float32).astype(np.float64)
                            for k, v in short_run.params.items()}, ids, config)
    assert np.array_equal(minigpt.forward(p, ids, config), want)
    assert path.stat().st_size < 1_000_000


def test_untrained_model_is_at_chance():
    pytest.importorskip("torch")
    from qkv.lab import train

    config = minigpt.Config(vocab=len(corpus.VOCAB), context=corpus.MAX_LEN)
    acc = train.evaluate(minigpt.init(config, 0), config)["accuracy_third_singular"]
    assert 0.3 < acc < 0.7


def test_load_refuses_a_file_that_is_not_a_checkpoint(tmp_path):
    bad = tmp_path / "x.npz"
    np.savez(bad, a=np.zeros(2))
    with pytest.raises(ValueError, match="not a qkv Mini-GPT checkpoint"):
        minigpt.load(bad)


def test_unknown_words_are_refused():
    with pytest.raises(ValueError, match=r"unknown words \['dog'\]"):
        corpus.encode(["he", "dog"])


# ---- the command line --------------------------------------------------------------------------

def _lab(*args):
    from qkv.cli.lab import lab

    return CliRunner().invoke(lab, list(args))


def test_lab_json_and_png(tmp_path):
    png = tmp_path / "sym.png"
    r = _lab("symmetry", "--format", "json", "--png", str(png))
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["supported"] and data["rows"][0][0] == "W_Q = W_K"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lab_plain_prints_the_verdict_line():
    r = _lab("temperature", "--format", "plain")
    assert r.exit_code == 0
    assert "SUPPORTED: lower τ sharpens" in r.output


def test_lab_train_then_explain_the_checkpoint(tmp_path):
    pytest.importorskip("torch")
    from qkv.cli import main

    ckpt = tmp_path / "m.npz"
    r = _lab("train", "--steps", "3", "--out", str(ckpt), "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["checkpoint"] == str(ckpt) and ckpt.exists()
    r = CliRunner().invoke(main, ["explain", "--checkpoint", str(ckpt), "--text",
                                  "I work , he often ___", "--head", "1", "--format", "json"])
    assert r.exit_code == 0, r.output
    from qkv import Trace

    tr = Trace.from_json(r.stdout)
    assert tr.tokens == ["<bos>", "I", "work", ",", "he", "often"]
    assert np.allclose(tr.weights.sum(-1), 1)
    r = CliRunner().invoke(main, ["explain", "--checkpoint", str(ckpt), "--text", "he barks"])
    assert r.exit_code == 2 and "unknown words ['barks']" in r.output
    r = CliRunner().invoke(main, ["explain", "--checkpoint", str(tmp_path / "none.npz"),
                                  "--text", "he"])
    assert r.exit_code == 2 and "no checkpoint at" in r.output


@pytest.mark.slow
def test_full_training_learns_agreement_and_a_subject_head():
    pytest.importorskip("torch")
    from qkv.lab import train

    run = train.train(steps=300, seed=0)
    ev = train.evaluate(run.params, run.config)
    assert ev["accuracy_third_singular"] >= 0.95
    assert ev["agreement_head"]["mean_weight_on_subject"] > 0.3


def test_cost_traced_memory_grows_as_t_squared_blocked_does_not():
    from qkv.lab import cost

    r = cost.run(sizes=(512, 1024, 2048), d=16)
    a = np.array(r.rows, dtype=float)
    # closed form for the trace: 5 float32 T×T steps (scores … weights) plus the mask
    assert np.all(a[:, 3] * 2**20 >= 5 * 4 * a[:, 0] ** 2)
    assert a[-1, 3] / a[-2, 3] > 3.5  # ≈ 4× per doubling
    assert a[-1, 5] / a[-2, 5] < 2.5 and a[-1, 5] * 2**20 < 4 * a[-1, 0] ** 2 / 8
    assert r.supported
