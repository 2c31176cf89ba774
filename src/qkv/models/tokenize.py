"""Tokenizers for the real models, built with the ``tokenizers`` package.

MiniLM: the WordPiece tokenizer.json shipped beside its weights (its [CLS] … [SEP] template
kept, any baked-in padding or truncation turned off). SmolLM2: a byte-level BPE assembled from
the vocabulary and merges stored in the GGUF file, splitting digits one by one as the
checkpoint's own tokenizer does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qkv.models.packages import require

CONTROL = 3  # GGUF token_type of special (control) tokens such as <|im_start|>


@dataclass
class Tokenizer:
    """Text ⇄ token ids. ``encode`` returns (ids, labels): labels are the readable pieces."""

    backend: Any  # a tokenizers.Tokenizer
    byte_level: bool  # labels come from decoding each id (SmolLM2) or the vocabulary (MiniLM)

    def encode(self, text: str) -> tuple[list[int], list[str]]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        enc = self.backend.encode(text)
        ids = list(enc.ids)
        return ids, self.labels(ids) if self.byte_level else list(enc.tokens)

    def labels(self, ids) -> list[str]:
        """One readable label per id (a byte-level piece decoded on its own)."""
        if not self.byte_level:
            return [self.backend.id_to_token(i) for i in ids]
        return [self.backend.decode([i], skip_special_tokens=False) for i in ids]

    def decode(self, ids) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=False)


def wordpiece(path, *, model: str) -> Tokenizer:
    """The shipped tokenizer.json (BERT WordPiece, lower-cased) without padding/truncation."""
    tokenizers = require("tokenizers", model=model)
    tk = tokenizers.Tokenizer.from_file(str(path))
    tk.no_padding()
    tk.no_truncation()
    return Tokenizer(tk, byte_level=False)


def byte_level_bpe(tokens: list[str], merges: list[str], token_type, *, model: str) -> Tokenizer:
    """A GPT-2-style byte-level BPE from a GGUF vocabulary (id order) and merge list."""
    tokenizers = require("tokenizers", model=model)
    from tokenizers import AddedToken, decoders, models, pre_tokenizers

    vocab = {tok: i for i, tok in enumerate(tokens)}
    pairs = [(left, right) for left, _, right in (m.partition(" ") for m in merges)]
    tk = tokenizers.Tokenizer(models.BPE(vocab, pairs, fuse_unk=False))
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tk.decoder = decoders.ByteLevel()
    if token_type is not None:
        special = [t for t, kind in zip(tokens, token_type, strict=False) if kind == CONTROL]
        tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return Tokenizer(tk, byte_level=True)
