"""A local transformers model directory with the surface of a bundled ``qkv.models`` model, so
``qkv explain --model PATH``, ``qkv heads --model PATH`` and the page's model mode show it.

    >>> m = qkv.hf.local.open_dir("./my-llama")     # safetensors only, no remote code
    >>> run = m.trace("The cat sat")                 # an HFRun: a qkv.models.ModelTrace
    >>> run.layer(1)["weights"].shape                # (n_heads, L, L)
"""

from __future__ import annotations

import numpy as np
import torch
import transformers

from qkv.hf import loading
from qkv.hf.session import attention_layers
from qkv.hf.tokens import texts
from qkv.hf.tracing import HFRun, trace
from qkv.models import NAMES

# what a checkpoint's own code may raise on a text (a kernel its configuration does not suit …)
RUN_ERRORS = (RuntimeError, TypeError, NotImplementedError)


def could_not_run(name: str, error: Exception) -> str:
    """The one-line report of a model that failed on a text: its name and the error's first
    line (at most 200 characters)."""
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{name} could not run this text: {type(error).__name__}: {first[:200]}"


class LocalModel:
    """A transformers model computed by qkv (``attn_implementation="qkv"``) and its tokenizer,
    named ``name``; ``n_layers`` counts its attention layers in the order the model runs them."""

    def __init__(
        self, model, tokenizer, name: str, *, source: str | None = None, allow_pickle: bool = False
    ):
        """source: the directory or hub id it came from, so ``causal_lm`` can load its LM head."""
        c = model.config
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.source, self.allow_pickle = source, allow_pickle
        self.config = c  # what qkv.hf.taxonomy.measure reads the vocabulary size from
        self.n_layers = len(attention_layers(model))
        self.n_heads = c.num_attention_heads
        self.n_kv_heads = getattr(c, "num_key_value_heads", None) or self.n_heads
        self.d_model = c.hidden_size
        self.d_head = getattr(c, "head_dim", None) or self.d_model // self.n_heads
        self.max_tokens = getattr(c, "max_position_embeddings", None)

    def encode(self, text: str, *, limit: int | None = None) -> tuple[list[int], list[str]]:
        """(ids, token labels) of a text as the model sees it (special tokens included),
        checked: not empty, at most ``limit`` tokens (the context length by default)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text.strip():
            raise ValueError(f"text must contain at least one non-space character, got {text!r}")
        ids = self._inputs(text)["input_ids"][0].tolist()
        limit = self.max_tokens if limit is None else limit
        if limit is not None and len(ids) > limit:
            raise ValueError(
                f"text is {len(ids)} tokens long; {self.name} reads at most {limit} "
                f"tokens: shorten the text"
            )
        return ids, texts(self.tokenizer, ids)

    def weights_of_ids(self, ids) -> np.ndarray:
        """Every layer's weights for a batch of token ids (B, L): (B, n_layers, n_heads, L, L),
        as the bundled models give them to ``qkv.hf.taxonomy.measure``."""
        from qkv.hf.taxonomy import _hf_weights

        return _hf_weights(self.model, ids)

    def _inputs(self, text: str) -> dict:
        inputs = self.tokenizer(text, return_tensors="pt")
        return {k: inputs[k] for k in ("input_ids", "attention_mask") if k in inputs}

    def predicts_next_token(self) -> bool:
        """Whether the checkpoint is a causal language model (it has an LM head to load)."""
        return any(
            a.endswith(("ForCausalLM", "LMHeadModel")) for a in (self.config.architectures or ())
        )

    def causal_lm(self):
        """The same checkpoint with its next-token head, computed by qkv (a second load); a
        ValueError when ``source`` no longer holds it (gone, broken, or another model)."""
        if self.source is None or not self.predicts_next_token():
            raise ValueError(
                f"{self.name} has no next-token head to load (architectures: "
                f"{self.config.architectures})"
            )
        changed = f"{self.name}: {self.source} changed since it was loaded"
        try:
            model, _, _ = loading.load(self.source, causal_lm=True, allow_pickle=self.allow_pickle)
        except (ValueError, OSError) as e:
            raise ValueError(f"{changed}: {e}") from None
        if not _same_weights(self.model.state_dict(), model.base_model.state_dict()):
            raise ValueError(f"{changed}: it now holds other weights; open it again")
        return model

    def trace(self, text: str) -> HFRun:
        """Run ``text`` through the model, every attention layer traced by qkv's engine."""
        try:
            with torch.no_grad(), trace(self.model, tokenizer=self.tokenizer) as run:
                self.model(**self._inputs(text))
        except RUN_ERRORS as e:
            raise ValueError(could_not_run(self.name, e)) from None
        run.model = self.name
        return run


def _same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a
    )


def open_dir(path, *, allow_pickle: bool = False) -> LocalModel:
    """Load the transformers model directory ``path`` (``config.json`` plus weights), or the
    hub id ``path`` (owner/name, see ``qkv.hf.loading.locate``), without its LM head;
    ValueError when it is neither, holds only pickle weights and ``allow_pickle`` is False, or
    its config.json asks for more than its weights hold (``qkv.hf.gate``, before building)."""
    spec = str(path)
    if spec in NAMES:
        raise ValueError(f"{spec} is a bundled model: load it with qkv.models.load({spec!r})")
    logs = transformers.utils.logging
    level, bars = logs.get_verbosity(), logs.is_progress_bar_enabled()
    logs.set_verbosity_error()  # not the load report: an unused LM head is expected here
    logs.disable_progress_bar()
    try:
        model, tokenizer, name = loading.load(spec, causal_lm=False, allow_pickle=allow_pickle)
    finally:
        logs.set_verbosity(level)
        if bars:
            logs.enable_progress_bar()
    return LocalModel(model, tokenizer, name, source=spec, allow_pickle=allow_pickle)
