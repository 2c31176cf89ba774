"""Train the Mini-GPT on agreement sentences with torch (AdamW), and measure what it learned."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from qkv.lab import corpus, minigpt


@dataclass
class Run:
    """One training run: its settings, learning curve and the first steps' gradient norms."""

    scale: float | None
    temperature: float
    steps: int
    params: dict  # NumPy weights after training
    config: minigpt.Config
    losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train(*, steps: int = 600, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
          scale: float | None = None, temperature: float = 1.0,
          progress: Callable[[int, float, float], None] | None = None) -> Run:
    """Train with next-token cross-entropy; ``progress(step, loss, verb_accuracy)`` each step."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small runs fastest on one thread
    try:
        return _train(torch, steps, batch_size, lr, seed, scale, temperature, progress)
    finally:
        torch.set_num_threads(threads)


def _train(torch, steps, batch_size, lr, seed, scale, temperature, progress) -> Run:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    config = minigpt.Config(vocab=len(corpus.VOCAB), context=corpus.MAX_LEN)
    params = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True)
              for k, v in minigpt.init(config, seed).items()}
    decay = [v for k, v in params.items() if k.split(".")[-1].startswith("W")
             or k.endswith("emb")]
    rest = [v for k, v in params.items() if all(v is not d for d in decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": rest, "weight_decay": 0.0}], lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps,
                                                pct_start=0.1)
    run = Run(scale, temperature, steps, {}, config)
    start = time.perf_counter()
    for step in range(steps):
        b = corpus.batch(rng, batch_size)
        ids = torch.from_numpy(b.ids)
        logits = minigpt.forward(params, ids[:, :-1], config, scale=scale,
                                 temperature=temperature)
        target = ids[:, 1:]
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, config.vocab), target.reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        sched.step()
        run.losses.append(loss.item())
        run.grad_norms.append(float(norm))
        if progress:
            progress(step, loss.item(), verb_accuracy(logits.detach().numpy(), b))
    run.seconds = time.perf_counter() - start
    run.params = {k: v.detach().numpy().copy() for k, v in params.items()}
    return run


def verb_accuracy(logits: np.ndarray, b: corpus.Batch, *, third_only: bool = True) -> float:
    """How often the right form (stem vs stem+s) of the right verb scores higher, over the verbs
    after the first clause (3rd-person-singular subjects only by default).

    ``logits`` predict the next token: position t-1 predicts the word at t.
    """
    keep = b.third if third_only else np.ones(len(b.third), bool)
    if not keep.any():
        return float("nan")
    sent, pos = b.verb_pos[keep, 0], b.verb_pos[keep, 1]
    right = b.ids[sent, pos]
    word = [corpus.VOCAB[i] for i in right]
    stem = [w[:-1] if w.endswith("s") and w[:-1] in corpus.VERBS else w for w in word]
    other = np.array([corpus.VOCAB.index(s if w != s else s + "s") for w, s in zip(word, stem)])
    row = logits[sent, pos - 1]  # (n, vocab): the prediction made one position earlier
    return float(np.mean(row[np.arange(len(right)), right] > row[np.arange(len(right)), other]))


def evaluate(params: dict, config: minigpt.Config, *, seed: int = 1, size: int = 400,
             scale=None, temperature: float = 1.0) -> dict:
    """Held-out accuracy (pairs never trained on) and each head's weight from the verb slot to
    the subject, in NumPy through qkv's own attention."""
    b = corpus.batch(np.random.default_rng(seed), size, test=True)
    logits, traces = minigpt.forward(params, b.ids, config, scale=scale,
                                     temperature=temperature, return_traces=True)
    sent, slot = b.verb_pos[:, 0], b.verb_pos[:, 1] - 1  # the query that predicts the verb
    far = slot != b.subject_pos  # at least one filler between subject and verb
    heads = np.array([[tr.weights[sent[far], h, slot[far], b.subject_pos[far]].mean()
                       for h in range(config.n_heads)] for tr in traces])  # (layers, heads)
    layer, head = np.unravel_index(int(np.argmax(heads)), heads.shape)
    return {
        "accuracy_third_singular": verb_accuracy(logits, b),
        "accuracy_all_subjects": verb_accuracy(logits, b, third_only=False),
        "subject_weight": heads.tolist(),
        "agreement_head": {"layer": int(layer), "head": int(head),
                           "mean_weight_on_subject": float(heads[layer, head])},
        "verbs_evaluated": int(b.third.sum()),
    }
