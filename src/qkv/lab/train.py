"""Train the Mini-GPT on agreement sentences with torch (AdamW)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

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


def train(
    data: np.ndarray,
    *,
    steps: int = 1200,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    window: int | None = None,
    scale: float | None = None,
    temperature: float = 1.0,
    progress: Callable[[int, float], None] | None = None,
) -> Run:
    """Train on the token ids ``data`` (N, T) with next-token cross-entropy: each step a batch
    of ``batch_size`` rows drawn from ``data`` only; ``progress(step, loss)`` each step.
    ``window`` 2 gives the no-attention baseline (each token sees itself and the previous one)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small runs fastest on one thread
    try:
        return _train(
            torch, data, steps, batch_size, lr, seed, window, scale, temperature, progress
        )
    finally:
        torch.set_num_threads(threads)


def _train(torch, data, steps, batch_size, lr, seed, window, scale, temperature, progress) -> Run:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    config = minigpt.Config(vocab=len(corpus.VOCAB), context=corpus.MAX_LEN, window=window)
    params = {
        k: torch.tensor(v, dtype=torch.float32, requires_grad=True)
        for k, v in minigpt.init(config, seed).items()
    }
    decay = [v for k, v in params.items() if k.split(".")[-1].startswith("W") or k.endswith("emb")]
    rest = [v for k, v in params.items() if all(v is not d for d in decay)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}], lr=lr
    )
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    run = Run(scale, temperature, steps, {}, config)
    data = torch.from_numpy(data)
    start = time.perf_counter()
    for step in range(steps):
        ids = data[torch.from_numpy(rng.integers(len(data), size=batch_size))]  # (B, T)
        logits = minigpt.forward(
            params, ids[:, :-1], config, scale=scale, temperature=temperature
        )  # (B, T-1, vocab)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, config.vocab), ids[:, 1:].reshape(-1), ignore_index=0
        )
        opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        sched.step()
        run.losses.append(loss.item())
        run.grad_norms.append(float(norm))
        if progress:
            progress(step, loss.item())
    run.seconds = time.perf_counter() - start
    run.params = {k: v.detach().numpy().copy() for k, v in params.items()}
    return run
