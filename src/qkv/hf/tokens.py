"""Token ids and their text for qkv.hf: the one way a transformers tokenizer's tokens are named.

A vocabulary spells " Mary" as ``ĠMary`` (byte-level BPE) or ``▁Mary`` (SentencePiece); qkv
names a token by its own text, " Mary", and shows its edge spaces as ``␣Mary``
(``qkv.explain.tokens.visible``) wherever it prints one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from qkv.explain.tokens import visible

SPACE_MARK = "▁"  # SentencePiece's word-start mark: its decoder drops the space of a lone token


def texts(tokenizer, ids) -> list[str]:
    """Each id's own text (" Mary", not ``ĠMary``), decoded one id at a time; ``tokenizer``
    None names ids by their numbers."""
    ids = [int(i) for i in ids]
    if tokenizer is None:
        return [str(i) for i in ids]
    pieces = tokenizer.convert_ids_to_tokens(ids)
    out = []
    for i, piece in zip(ids, pieces, strict=True):
        text = tokenizer.decode([i], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if isinstance(piece, str) and piece.startswith(SPACE_MARK) and not text.startswith(" "):
            text = " " + text
        out.append(text)
    return out


def prompt_ids(prompt, tokenizer=None) -> torch.Tensor:
    """A prompt as token ids (1, L): a text (with ``tokenizer``, special tokens as the tokenizer
    adds them), a sequence of ids, a (1, L) tensor, or a tokenizer's output dict."""
    if isinstance(prompt, str):
        if tokenizer is None:
            raise ValueError("a text prompt needs its tokenizer: pass tokenizer=")
        if not prompt.strip():
            raise ValueError(f"the prompt must hold a non-space character, got {prompt!r}")
        prompt = tokenizer(prompt, return_tensors="pt")
    if isinstance(prompt, dict) or hasattr(prompt, "keys"):
        mask = prompt.get("attention_mask")
        if mask is not None and not bool(torch.all(torch.as_tensor(mask) != 0)):
            raise ValueError("the prompt must be one sequence without padding")
        prompt = prompt["input_ids"]
    ids = torch.as_tensor(prompt)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[0] != 1 or ids.shape[1] == 0 or ids.is_floating_point():
        raise ValueError(
            f"a prompt must be one sequence of token ids, shaped (L,) or (1, L) with L ≥ 1, "
            f"got {tuple(ids.shape)} {ids.dtype}"
        )
    return ids.long()


def token_id(token, tokenizer, vocab_size: int, *, what: str = "target") -> int:
    """The id of one token: an int id, or a text that is exactly one token (" Mary"; a leading
    ``␣`` stands for a space, as qkv prints it). ValueError naming ``what`` otherwise."""
    if isinstance(token, bool):
        raise ValueError(f"{what} must be a token text or an id, got {token!r}")
    if isinstance(token, int):
        if not 0 <= token < vocab_size:
            raise ValueError(f"{what} id must be in [0, {vocab_size}), got {token}")
        return token
    if not isinstance(token, str) or not token:
        raise ValueError(f"{what} must be a token text or an id, got {token!r}")
    if tokenizer is None:
        raise ValueError(f"a {what} given as text ({token!r}) needs the tokenizer: pass tokenizer=")
    text = token.replace("␣", " ")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = [int(i) for i in torch.as_tensor(ids).reshape(-1)]
    if len(ids) != 1:
        pieces = " ".join(visible(t) for t in texts(tokenizer, ids))
        raise ValueError(
            f"{what} {visible(text)!r} is not a single token: the tokenizer splits it into "
            f"{len(ids)} ({pieces}); give one token, with its leading space if it has one"
        )
    return ids[0]


@dataclass(frozen=True)
class Token:
    """A token by its own text (" Mary") and id."""

    token: str
    id: int

    def to_dict(self) -> dict:
        return {"token": self.token, "id": self.id}


def named(tokenizer, i: int) -> Token:
    """Token ``i`` with its text."""
    return Token(texts(tokenizer, [i])[0], int(i))


def position_of(position: int, L: int) -> int:
    """A position of an L-token prompt, counted from the end when negative: in [0, L)."""
    if isinstance(position, bool) or not isinstance(position, int) or not -L <= position < L:
        raise ValueError(
            f"position must be an int in [-{L}, {L}) for this {L}-token prompt, got {position!r}"
        )
    return position % L
