"""The lab's experiments against closed forms, and the Mini-GPT against qkv's NumPy attention."""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

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


def test_every_generated_verb_agrees_with_its_own_subject():
    for s in corpus.training_set(3, 300) + corpus.test_set(3, 10):
        w = s.words
        assert corpus.VERB_OF[w[s.verb]][1] == corpus.NOUN_OF[w[s.subject]][1] == s.plural
        for i, word in enumerate(w):
            if word in corpus.REL_OF:  # "that the man holds": holds agrees with man
                assert corpus.REL_OF[word][1] == corpus.NOUN_OF[w[i - 1]][1]
        assert s.attractors == tuple(i for i, x in enumerate(w) if x in corpus.NOUN_OF)[1:]
        assert len(w) <= corpus.MAX_LEN


def test_the_whole_training_stream_never_holds_a_held_out_pair(tmp_path):
    from qkv.lab import agreement

    train, test = corpus.training_set(0, agreement.TRAIN_SIZE), corpus.test_set(0, 50)
    corpus.dump(tmp_path, train, test)
    # read back from the dumped text alone: every clause's (subject, verb) of every sentence
    lines = (tmp_path / "train.txt").read_text().splitlines()
    assert len(lines) == agreement.TRAIN_SIZE
    seen = {p for line in lines for p in corpus.relations(line.split())}
    assert not seen & corpus.HELD_OUT
    assert all(p[1] in dict(corpus.VERBS) or p[1] in dict(corpus.REL_VERBS) for p in seen)
    held = [
        corpus.relations(line.split())[0]
        for line in (tmp_path / "heldout.txt").read_text().splitlines()
    ]
    assert len(held) == len(test) and all(p in corpus.HELD_OUT and p not in seen for p in held)
    proof = corpus.overlap(train, test)
    assert proof["training_clauses_with_held_out_pair"] == 0
    assert proof["test_pairs_seen_in_training"] == proof["test_pairs_not_held_out"] == 0
    # a sentence that does hold a held-out pair is counted, in a relative clause too
    noun, verb = sorted(corpus.HELD_OUT)[0]
    bad = corpus.parse(["<bos>", "the", noun, verb, "."])
    assert corpus.overlap([bad], [])["training_clauses_with_held_out_pair"] == 1


def test_wilson_interval_against_hand_values():
    from qkv.lab.evaluate import wilson

    low, high = wilson(8, 10)  # worked by hand: (0.8 + 0.19207 ∓ 0.31360) / 1.38415
    assert abs(low - 0.49016) < 1e-4 and abs(high - 0.94331) < 1e-4
    assert wilson(0, 0) == (0.0, 1.0) and wilson(5, 5)[1] == pytest.approx(1.0)


def test_nearest_noun_is_wrong_exactly_when_the_nearest_noun_differs():
    from qkv.lab import evaluate

    test = corpus.test_set(1, 20)
    acc = evaluate.scored(evaluate.nearest_noun_correct(test), test)
    assert acc["0 attractors"]["accuracy"] == 1.0
    assert acc["all attractors opposite (≥1)"]["accuracy"] == 0.0
    assert acc["all attractors opposite (≥1)"]["n"] >= 3 * 20  # plus random ones by chance


def test_unknown_words_name_the_vocabulary():
    with pytest.raises(ValueError, match=r"unknown words \['banana'\]; the Mini-GPT knows"):
        corpus.encode(["the", "banana"])


@pytest.fixture(scope="module")
def short_run():
    pytest.importorskip("torch", reason="training needs torch (pip install torch==2.13.0)")
    from qkv.lab import train

    return train.train(corpus.ids(corpus.training_set(1, 500)), steps=40, seed=1)


def test_short_training_reduces_the_loss(short_run):
    assert np.mean(short_run.losses[-5:]) < np.mean(short_run.losses[:5]) - 0.5
    assert len(short_run.grad_norms) == 40 and all(np.isfinite(short_run.grad_norms))


def test_torch_model_attention_equals_numpy_attention_on_the_same_weights(short_run):
    import torch

    ids = corpus.ids(corpus.test_set(9, 1)[:4])
    p_np = short_run.params
    p_t = {k: torch.tensor(v) for k, v in p_np.items()}
    lt, tt = minigpt.forward(p_t, torch.from_numpy(ids), short_run.config, return_traces=True)
    ln, tn = minigpt.forward(p_np, ids, short_run.config, return_traces=True)
    assert np.allclose(lt.numpy(), ln, atol=1e-4)
    for a, c in zip(tt, tn, strict=False):
        assert np.allclose(a.weights.numpy(), c.weights, atol=1e-6)
    # and layer 0's weights equal torch's own softmax on the same q, k
    q, k = torch.tensor(tn[0].q), torch.tensor(tn[0].k)
    T = ids.shape[1]
    hidden = ~torch.ones(T, T).bool().tril()
    ref = torch.softmax((q @ k.mT / 4.0).masked_fill(hidden, -torch.inf), -1)
    assert np.allclose(tn[0].weights, ref.numpy(), atol=1e-12)


def test_no_attention_model_sees_only_itself_and_the_previous_token(short_run):
    assert minigpt.window_mask(4, 2).tolist() == [
        [1, 0, 0, 0],
        [1, 1, 0, 0],
        [0, 1, 1, 0],
        [0, 0, 1, 1],
    ]
    config = minigpt.Config(**{**short_run.config.__dict__, "window": 2})
    ids = corpus.ids(corpus.test_set(4, 1)[3:5])  # two sentences, one attractor each
    changed = ids.copy()
    changed[:, 2] = corpus.INDEX["dogs"]  # a different word two places back
    a = minigpt.forward(short_run.params, ids, config)
    b = minigpt.forward(short_run.params, changed, config)
    # two layers of "itself and the previous token": position t hears t, t−1 and t−2 only
    assert np.array_equal(a[:, 5:], b[:, 5:])
    assert not np.allclose(a[:, 4], b[:, 4]) and not np.allclose(a[:, 2], b[:, 2])
    full = minigpt.forward(short_run.params, changed, short_run.config)
    assert not np.allclose(
        minigpt.forward(short_run.params, ids, short_run.config)[:, 5:], full[:, 5:]
    )


def test_zero_ablation_equals_zeroing_that_heads_output_matrix(short_run):
    ids = corpus.ids(corpus.test_set(5, 1))
    p = dict(short_run.params)
    W_O = p["1.W_O"].copy()
    W_O[2] = 0.0  # head 2 of layer 1 writes nothing
    p["1.W_O"] = W_O
    want = minigpt.forward(p, ids, short_run.config)
    got = minigpt.forward(short_run.params, ids, short_run.config, ablate={(1, 2): None})
    assert np.allclose(got, want, atol=1e-12)
    # mean ablation by a vector m adds m·W_O^h at every position instead
    m = np.arange(16) / 16
    p["1.b_O"] = short_run.params["1.b_O"] + m @ short_run.params["1.W_O"][2]
    want = minigpt.forward(p, ids, short_run.config)
    got = minigpt.forward(short_run.params, ids, short_run.config, ablate={(1, 2): m})
    assert np.allclose(got, want, atol=1e-5)  # float32 weights, summed in another order


def test_checkpoint_round_trip_reproduces_outputs(short_run, tmp_path):
    path = tmp_path / "m.npz"
    minigpt.save(path, short_run.params, short_run.config, {"note": 1})
    p, config, meta = minigpt.load(path)
    assert config == short_run.config and meta == {"note": 1}
    ids = corpus.ids(corpus.test_set(2, 1))
    want = minigpt.forward(
        {k: v.astype(np.float32).astype(np.float64) for k, v in short_run.params.items()},
        ids,
        config,
    )
    assert np.array_equal(minigpt.forward(p, ids, config), want)
    assert path.stat().st_size < 1_000_000


def test_load_refuses_a_file_that_is_not_a_checkpoint(tmp_path):
    bad = tmp_path / "x.npz"
    np.savez(bad, a=np.zeros(2))
    with pytest.raises(ValueError, match="not a qkv Mini-GPT checkpoint"):
        minigpt.load(bad)


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


def _tiny(tmp_path, name, *more):
    ckpt = tmp_path / f"{name}.npz"
    r = _lab(
        "train",
        "--steps",
        "4",
        "--train-size",
        "200",
        "--per-group",
        "3",
        "--seed",
        "7",
        "--out",
        str(ckpt),
        "--format",
        "json",
        *more,
    )
    assert r.exit_code == 0, r.output
    return ckpt, json.loads(r.stdout)


def test_lab_train_json_holds_split_proof_accuracies_baselines_and_ablations(tmp_path):
    pytest.importorskip("torch")
    ckpt, data = _tiny(tmp_path, "a", "--dump-corpus", str(tmp_path / "corpus"))
    meta = data["meta"]
    assert data["checkpoint"] == str(ckpt) and ckpt.exists() and meta["seed"] == 7
    split = meta["split"]
    assert split["train_sentences"] == 200 and split["test_sentences"] == 7 * 3
    assert split["training_clauses_with_held_out_pair"] == 0
    assert split["test_pairs_seen_in_training"] == 0
    groups = [
        "0 attractors",
        "1 attractor",
        "2 attractors",
        "3 attractors",
        "≥1 opposite-number attractor",
        "all attractors opposite (≥1)",
        "all held-out sentences",
    ]
    for table in (meta["accuracy"], *meta["baselines"].values()):
        assert list(table) == groups
        for g in table.values():
            assert g["accuracy"] == g["correct"] / g["n"] and g["low"] <= g["accuracy"] <= g["high"]
    assert set(meta["baselines"]) == {"no_attention", "nearest_noun", "untrained"}
    assert [(r["layer"], r["head"]) for r in meta["ablation"]] == [
        (l, h) for l in range(2) for h in range(4)
    ]
    best = max(meta["ablation"], key=lambda r: r["weight_on_subject"] - r["weight_on_attractors"])
    assert meta["top_head"] == {"layer": best["layer"], "head": best["head"]}
    for r in meta["ablation"]:
        assert r["zero_drop"] == pytest.approx(
            meta["accuracy"][meta["ablation_group"]]["accuracy"] - r["zero_ablated_accuracy"]
        )
    joint = meta["subject_heads"]
    assert joint["heads"] == [
        f"{r['layer']}.{r['head']}"
        for r in meta["ablation"]
        if r["weight_on_subject"] > r["weight_on_attractors"]
    ]
    assert joint["zero_drop"] == pytest.approx(
        meta["accuracy"][meta["ablation_group"]]["accuracy"] - joint["zero_ablated_accuracy"]
    )
    # the dumped sentences are the ones scored and trained on
    held = (tmp_path / "corpus" / "heldout.txt").read_text().splitlines()
    assert held == [" ".join(s.words) for s in corpus.test_set(7, 3)]
    assert len((tmp_path / "corpus" / "train.txt").read_text().splitlines()) == 200
    # the same seed gives the same numbers (training seconds aside)
    _, again = _tiny(tmp_path, "b")
    for d in (meta, again["meta"]):
        d.pop("seconds")
    assert again["meta"] == meta


def test_lab_train_then_explain_the_checkpoint(tmp_path):
    pytest.importorskip("torch")
    from qkv.cli import main

    ckpt, _ = _tiny(tmp_path, "m")
    r = CliRunner().invoke(
        main,
        [
            "explain",
            "--checkpoint",
            str(ckpt),
            "--text",
            "the key to the cabinets ___",
            "--layer",
            "1",
            "--head",
            "2",
            "--format",
            "json",
        ],
    )
    assert r.exit_code == 0, r.output
    from qkv import Trace

    tr = Trace.from_json(r.stdout)
    assert tr.tokens == ["<bos>", "the", "key", "to", "the", "cabinets"]
    assert np.allclose(tr.weights.sum(-1), 1)
    params, config, _ = minigpt.load(ckpt)
    _, want = minigpt.forward(
        params, np.array(corpus.encode(tr.tokens)), config, return_traces=True
    )
    assert np.allclose(tr.weights, want[1].weights, atol=1e-6)
    r = CliRunner().invoke(main, ["explain", "--checkpoint", str(ckpt), "--text", "he barks"])
    assert r.exit_code == 2 and "unknown words ['he', 'barks']; the Mini-GPT knows" in r.output
    r = CliRunner().invoke(
        main, ["explain", "--checkpoint", str(tmp_path / "none.npz"), "--text", "the key"]
    )
    assert r.exit_code == 2 and "no checkpoint at" in r.output


def test_lab_train_png_marks_the_top_head(tmp_path):
    pytest.importorskip("torch")
    png = tmp_path / "head.png"
    _tiny(tmp_path, "p", "--png", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cost_traced_memory_grows_as_t_squared_blocked_does_not():
    from qkv.lab import cost

    r = cost.run(sizes=(512, 1024, 2048), d=16)
    a = np.array(r.rows, dtype=float)
    # closed form for the trace: 4 distinct float32 T×T steps (scores, scaled — the same array
    # as tempered at τ = 1 —, masked, weights) plus the boolean causal mask
    assert np.all(a[:, 3] * 2**20 >= (4 * 4 + 1) * a[:, 0] ** 2)
    assert a[-1, 3] / a[-2, 3] > 3.5  # ≈ 4× per doubling
    assert a[-1, 5] / a[-2, 5] < 2.5 and a[-1, 5] * 2**20 < 4 * a[-1, 0] ** 2 / 8
    assert r.supported


def test_lab_temperature_columns_name_the_key_each_weight_is_on():
    r = _lab("temperature")  # rich tables: a "[the]" in a label must not be read as markup
    assert r.exit_code == 0, r.output
    header = r.output.splitlines()[1].split()
    assert header[-6:] == ["w→the@0", "w→cat", "w→sat", "w→on", "w→the@4", "w→mat"]


def test_log_log_panels_tick_labels_are_the_sizes_and_do_not_overlap():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from qkv.lab import cost

    r = cost.run(sizes=(256, 512, 1024, 2048, 4096), d=8)
    fig = Figure(figsize=(10, 4.5), dpi=100)  # the size 'qkv lab --png' draws at
    FigureCanvasAgg(fig)
    r.plot(fig)
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        shown = [
            t
            for t in ax.get_xticklabels(minor=False) + ax.get_xticklabels(minor=True)
            if t.get_text() and t.get_visible()
        ]
        assert [t.get_text() for t in shown] == ["256", "512", "1024", "2048", "4096"]
        boxes = sorted((t.get_window_extent(renderer) for t in shown), key=lambda b: b.x0)
        assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:], strict=False))
