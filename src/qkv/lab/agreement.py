"""The agreement experiment end to end: split, train the Mini-GPT and the no-attention
baseline the same way, score both, the untrained model and the nearest-noun heuristic on the
held-out sentences, and ablate every head."""

from __future__ import annotations

from collections.abc import Callable

from qkv.lab import corpus, evaluate, minigpt, train

TRAIN_SIZE = 20_000  # training sentences (the whole stream: batches are drawn from these)
PER_GROUP = 200  # held-out sentences per (attractor count, attractor numbers) group


def experiment(
    *,
    seed: int = 0,
    steps: int = 1200,
    train_size: int = TRAIN_SIZE,
    per_group: int = PER_GROUP,
    compare: bool = False,
    dump: str | None = None,
    trainer: Callable | None = None,
) -> tuple[dict, dict]:
    """(meta, runs): every number ``qkv lab train`` reports, and the training runs by name
    (the first is the Mini-GPT). ``trainer(label, data, **kwargs)`` trains (default
    ``train.train``), e.g. with a progress bar."""
    trainer = trainer or (lambda label, data, **kw: train.train(data, **kw))
    sentences = corpus.training_set(seed, train_size)
    held_out = corpus.test_set(seed, per_group)
    proof = corpus.overlap(sentences, held_out)
    if dump:
        corpus.dump(dump, sentences, held_out)
    data = corpus.ids(sentences)  # (N, MAX_LEN)
    runs = {"Mini-GPT": trainer("Mini-GPT", data, steps=steps, seed=seed)}
    attention_off = trainer("no attention", data, steps=steps, seed=seed, window=2)
    main = runs["Mini-GPT"]
    result = evaluate.evaluate(main.params, main.config, held_out)
    untrained = minigpt.init(main.config, seed)
    baselines = {
        "no_attention": evaluate.evaluate(
            attention_off.params, attention_off.config, held_out, ablations=False
        )["accuracy"],
        "nearest_noun": evaluate.scored(evaluate.nearest_noun_correct(held_out), held_out),
        "untrained": evaluate.evaluate(untrained, main.config, held_out, ablations=False)[
            "accuracy"
        ],
    }
    if compare:
        runs["no ÷√d_k"] = trainer("no ÷√d_k", data, steps=steps, seed=seed, scale=1.0)
        runs["τ = 4"] = trainer("τ = 4", data, steps=steps, seed=seed, temperature=4.0)
    meta = {
        "seed": seed,
        "steps": steps,
        "batch_size": 64,
        "split": {"train_sentences": len(sentences), "test_sentences": len(held_out), **proof},
        **result,
        "baselines": baselines,
        "seconds": {"Mini-GPT": main.seconds, "no attention": attention_off.seconds},
    }
    return meta, runs
