"""Text generation for a causal model: prefill the KV caches once, then one token per step."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from qkv import checks, steps
from qkv.cache import KVCache
from qkv.kernels.threads import single_threaded_blas
from qkv.models.base import TextModel

CHAT = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"


@dataclass
class Generated:
    """One generated token and, when asked for, the attention that chose it.

    ``weights`` (n_layers, n_heads, S): every head's attention row for the position whose
    output predicted this token (the last prompt token, then each previous new token), over
    the S positions seen so far; None unless ``generate(..., weights=True)``.
    """

    id: int
    text: str
    weights: np.ndarray | None = None


class Generator(TextModel):
    """A causal TextModel: subclasses set ``eos_id`` and implement ``logits`` and
    ``_forward(..., caches=, start=)`` (the layers' KV caches, the first position)."""

    eos_id: int

    def _forward(
        self, ids, lengths, keep, caches=None, start: int = 0, *, progress=None
    ) -> tuple[np.ndarray, dict]:
        raise NotImplementedError

    def logits(self, hidden: np.ndarray) -> np.ndarray:
        """Next-token logits from final hidden states: (..., d_model) -> (..., vocab)."""
        raise NotImplementedError

    def next_logits(self, ids) -> np.ndarray:
        """Logits for the token after ``ids``, by a full pass without a cache: (vocab,)."""
        ids = np.asarray(ids, dtype=np.int64)[None]  # (1, L)
        hidden, _ = self._forward(ids, np.array([ids.shape[1]]), keep=set())
        return self.logits(hidden[0, -1])

    def generate(
        self, prompt: str, max_new_tokens: int = 32, *, chat: bool = False, **sampling
    ) -> Iterator[Generated]:
        """Yield up to ``max_new_tokens`` new tokens, stopping after the end-of-turn token.

        The prompt runs in one pass (prefill), then one token per step against each layer's
        KV cache, made once with room for prompt + new tokens. By default every step takes the
        fast path (``qkv.attention`` without a trace: the blocked or fused kernel); with
        ``weights=True`` every layer runs the traced reference path instead and each token
        carries its attention rows (``Generated.weights``), as the page shows them.

        temperature 0 picks the most likely token (greedy); τ > 0 samples from
        softmax(logits/τ) restricted to the ``top_k`` most likely tokens (all when None), with
        ``numpy.random.default_rng(seed)``. ``chat=True`` wraps the prompt in the checkpoint's
        chat template (a user turn, then the assistant's). ``sampling``: temperature, top_k,
        seed and weights, as ``generate_ids`` takes them.
        """
        if chat:
            self.encode(prompt)  # the prompt itself must be a non-empty str, not just the template
        ids, _ = self.encode(CHAT.format(prompt=prompt) if chat else prompt)
        return self.generate_ids(ids, max_new_tokens, **sampling)

    def generate_ids(
        self,
        ids,
        max_new_tokens: int = 32,
        *,
        temperature: float = 0.0,
        top_k: int | None = None,
        seed=None,
        weights: bool = False,
        stop_at_eos: bool = True,
    ) -> Iterator[Generated]:
        """``generate`` from token ids (L,) already encoded; ``stop_at_eos=False`` always
        yields ``max_new_tokens`` tokens (what a benchmark needs)."""
        _check_sampling(max_new_tokens, temperature, top_k)
        ids = [int(i) for i in ids]
        if not ids:
            raise ValueError("ids must hold at least one token id, got none")
        if len(ids) + max_new_tokens > self.max_tokens:
            raise ValueError(
                f"prompt ({len(ids)} tokens) + max_new_tokens ({max_new_tokens}) "
                f"exceeds {self.name}'s context of {self.max_tokens} tokens"
            )
        return self._steps(
            ids,
            max_new_tokens,
            temperature,
            top_k,
            np.random.default_rng(seed),
            weights,
            stop_at_eos,
        )

    def _steps(self, ids, max_new_tokens, temperature, top_k, rng, weights, stop_at_eos):
        caches = [KVCache(capacity=len(ids) + max_new_tokens) for _ in range(self.n_layers)]
        keep = set(range(self.n_layers)) if weights else set()
        step = np.asarray([ids], dtype=np.int64)  # (1, L): the whole prompt first (prefill)
        start = 0
        for _ in range(max_new_tokens):
            # a one-token step is too small to share: BLAS threads would only wait on each other
            with single_threaded_blas() if step.shape[1] == 1 else contextlib.nullcontext():
                hidden, traces = self._forward(step, None, keep=keep, caches=caches, start=start)
            start += step.shape[1]
            rows = None
            if weights:  # (n_layers, n_heads, S): each layer's last query row
                rows = np.stack([_last_rows(traces[i]) for i in range(self.n_layers)])
            token = _pick(self.logits(hidden[0, -1]), temperature, top_k, rng)
            yield Generated(token, self.tokenizer.decode([token]), rows)
            if token == self.eos_id and stop_at_eos:
                return
            step = np.asarray([[token]], dtype=np.int64)  # (1, 1)


def _last_rows(trace) -> np.ndarray:
    """(n_heads, S): every head's weights for the last query of a layer's lazy trace (batch
    of one). A one-token step's whole step is that row; a prompt's is read one head's last
    row at a time (a long prompt's whole (n_heads, L, S) step is never made)."""
    if trace.settings["L"] == 1:
        return trace["weights"][0, :, -1, :]
    one = trace.sequence(0)
    return np.stack([one.rows(-1, head=h) for h in range(one.settings["n_heads"])])


def _pick(logits, temperature: float, top_k: int | None, rng) -> int:
    """The next token id: argmax when temperature is 0, else a sample from the tempered,
    top-k-restricted softmax (qkv's softmax, float64)."""
    if temperature == 0:
        return int(np.argmax(logits))
    tempered = logits.astype(np.float64) / temperature  # (vocab,)
    keep = None
    if top_k is not None and top_k < tempered.shape[-1]:
        threshold = np.partition(tempered, -top_k)[-top_k]
        keep = tempered >= threshold  # (vocab,) True = may be sampled
    probs = steps.softmax(steps.apply_mask(tempered, keep), keep)
    return int(rng.choice(probs.shape[-1], p=probs / probs.sum()))


def _check_sampling(max_new_tokens, temperature, top_k) -> None:
    checks.positive_int("max_new_tokens", max_new_tokens)
    checks.sampling_temperature(temperature)
    if top_k is not None:
        checks.positive_int("top_k", top_k)
