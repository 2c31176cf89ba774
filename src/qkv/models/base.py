"""What both real models share: checked tokenization, padded batches, per-layer traces."""

from __future__ import annotations

import numpy as np

from qkv.models.result import ModelTrace
from qkv.models.tokenize import Tokenizer


class TextModel:
    """A pretrained model whose attention runs through qkv's engine.

    Subclasses set ``name``, ``n_layers``, ``n_heads``, ``n_kv_heads``, ``d_model``, ``d_head``,
    ``max_tokens`` (the context length), ``pad_id``, ``tokenizer``, ``dtype`` and implement
    ``_forward(ids (B, L), lengths (B,), keep, progress=None) -> (hidden (B, L, d_model),
    {layer: LazyTrace})`` (every layer by the fast kernels; the layers in ``keep`` also give a
    lazy trace; ``progress(done, n_layers)`` is called after each layer when given).
    """

    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_head: int
    max_tokens: int
    pad_id: int
    tokenizer: Tokenizer
    dtype: np.dtype

    def _forward(self, ids, lengths, keep, *, progress=None) -> tuple[np.ndarray, dict]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.name!r}: {self.n_layers} layers × {self.n_heads} "
            f"heads (K/V heads {self.n_kv_heads}), d_model {self.d_model}, d_head "
            f"{self.d_head}, {np.dtype(self.dtype).name}>"
        )

    def encode(self, text: str, *, limit: int | None = None) -> tuple[list[int], list[str]]:
        """(ids, token labels) of a text, checked: not empty, at most ``limit`` tokens (the
        context length by default)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text.strip():
            raise ValueError(f"text must contain at least one non-space character, got {text!r}")
        ids, labels = self.tokenizer.encode(text)
        limit = self.max_tokens if limit is None else limit
        if len(ids) > limit:
            why = (
                f"{self.name}'s context is {self.max_tokens} tokens"
                if limit == self.max_tokens
                else f"at most {limit} tokens are read here ({self.name}'s context is "
                f"{self.max_tokens})"
            )
            raise ValueError(f"text is {len(ids)} tokens long; {why}: shorten the text")
        return ids, labels

    def tokenize(self, text: str) -> list[str]:
        """The token labels the model sees for ``text``."""
        return self.encode(text)[1]

    def trace(self, text: str, *, layers=None, progress=None) -> ModelTrace:
        """Run ``text`` (up to the model's context) through the model; keep a lazy attention
        trace of ``layers`` (all by default): x, q, k, v and out per layer, a few times the
        bytes of the hidden states, never L×L; the steps between are computed when read
        (``qkv.lazy.LazyTrace``). ``progress(done, n_layers)`` is called as each layer ends."""
        return self.trace_batch([text], layers=layers, progress=progress)[0]

    def trace_batch(self, texts: list[str], *, layers=None, progress=None) -> list[ModelTrace]:
        """Several texts in one right-padded batch (padded keys masked out); one ModelTrace
        each, cut back to its own tokens."""
        if isinstance(texts, str) or not texts:
            raise ValueError(f"texts must be a non-empty list of strings, got {texts!r}")
        keep = self._layers(layers)
        encoded = [self.encode(t) for t in texts]
        lengths = np.array([len(ids) for ids, _ in encoded])
        ids = np.full((len(texts), lengths.max()), self.pad_id, dtype=np.int64)  # (B, L)
        for b, (row, _) in enumerate(encoded):
            ids[b, : len(row)] = row
        hidden, traces = self._forward(ids, lengths, keep, progress=progress)
        out = []
        for b, (row, labels) in enumerate(encoded):
            n = len(row)
            kept = {i: t.sequence(b, np.arange(n), tokens=list(labels)) for i, t in traces.items()}
            out.append(ModelTrace(self.name, labels, row, kept, hidden[b, :n]))
        return out

    def weights_of_ids(self, ids) -> np.ndarray:
        """Attention weights of every layer for a batch of token ids of equal length (no
        padding): ids (B, L) -> (B, n_layers, n_heads, L, L)."""
        ids = np.asarray(ids, dtype=np.int64)
        _, traces = self._forward(ids, np.full(len(ids), ids.shape[1]), self._layers(None))
        return np.stack([np.asarray(traces[i]["weights"]) for i in sorted(traces)], axis=1)

    def hidden_states(self, text: str) -> np.ndarray:
        """The last layer's output (L, d_model) for ``text`` on the fast path: attention by
        ``qkv.attention``'s kernels, no trace kept (``trace(text).hidden`` is the same numbers
        by the traced reference path)."""
        ids, _ = self.encode(text)
        hidden, _ = self._forward(
            np.asarray([ids], dtype=np.int64), np.array([len(ids)]), keep=set()
        )
        return hidden[0]

    def layer_trace(self, text: str, *, layer: int):
        """The attention ``Trace`` of one layer for ``text`` (``.tokens`` set): the numbers of
        ``trace(text).layer(layer)`` to the last bit (every layer runs the same kernels)."""
        self._layers([layer])  # checks the index
        return self.trace(text, layers=[layer]).layer(layer)

    def _layers(self, layers) -> set[int]:
        if layers is None:
            return set(range(self.n_layers))
        chosen = set()
        for i in layers:
            if (
                isinstance(i, bool)
                or not isinstance(i, (int, np.integer))
                or not (0 <= i < self.n_layers)
            ):
                raise ValueError(
                    f"layer must be an integer in [0, {self.n_layers}) for {self.name}, got {i!r}"
                )
            chosen.add(int(i))
        return chosen

    def _padding_mask(self, lengths, L: int):
        """(B, 1, 1, S) key-padding mask, or None when no sequence is padded."""
        from qkv import masks

        if (np.asarray(lengths) == L).all():
            return None
        return masks.padding(np.asarray(lengths), L)[:, None]  # (B, 1, 1, S): heads, queries
