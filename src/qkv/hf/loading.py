"""Load a model for qkv.hf by a bundled name, a local transformers directory or a hub id, safely.

A hub id (``owner/name``) is a directory too, once found: the snapshot in the local Hugging
Face cache, else downloaded into it when the hub is reachable (never when ``HF_HUB_OFFLINE``
is set) — only the config, tokenizer and safetensors files (pickle ``.bin`` files only with
``allow_pickle``). Directories load with ``local_files_only`` (nothing fetched),
``trust_remote_code=False`` (no code from the checkpoint runs) and safetensors weights only;
pickle ``.bin`` weights load only with ``allow_pickle=True``, which the command line sets from
an explicit flag.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import torch
import transformers

from qkv.hf import gate
from qkv.models import NAMES

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")  # owner/name, as the hub spells it
# what a model needs to load and tokenize: never code (*.py), never pickle unless asked for
HUB_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "tokenizer*"]
KINDS = (
    f"one of {list(NAMES)}, a local transformers model directory holding config.json, "
    f"or a hub id (owner/name)"
)


def locate(spec: str, *, allow_pickle: bool = False) -> Path:
    """The directory holding the transformers model ``spec``: ``spec`` itself when it is a
    directory, else the snapshot of the hub id ``spec`` (from the local cache, or downloaded).
    ValueError, naming what was expected, when it is neither or cannot be had."""
    path = Path(spec)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"{spec} is a directory without config.json; model must be {KINDS}")
        return path
    if not HUB_ID.fullmatch(spec) or path.exists():
        raise ValueError(f"unknown model {spec!r}; choose {KINDS}")
    return _snapshot(spec, allow_pickle=allow_pickle)


def _snapshot(repo_id: str, *, allow_pickle: bool) -> Path:
    import huggingface_hub as hub
    from huggingface_hub import errors

    patterns = HUB_FILES + (["*.bin"] if allow_pickle else [])
    try:  # the local cache first: no network, no wait
        found = hub.snapshot_download(repo_id, allow_patterns=patterns, local_files_only=True)
    except (errors.LocalEntryNotFoundError, FileNotFoundError):
        if hub.constants.HF_HUB_OFFLINE:
            raise ValueError(
                f"{repo_id!r} is not a local directory nor in the Hugging Face "
                f"cache, and HF_HUB_OFFLINE is set: download it first, or pass "
                f"a directory"
            ) from None
        try:
            found = hub.snapshot_download(repo_id, allow_patterns=patterns)
        except (errors.HfHubHTTPError, errors.LocalEntryNotFoundError, OSError) as e:
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ValueError(
                f"{repo_id!r} is not a local directory, and fetching it from the "
                f"hub failed ({reason[:200]}); pass a directory, or download it "
                f"where the hub is reachable"
            ) from None
    path = Path(found)
    if not (path / "config.json").is_file():
        raise ValueError(f"hub model {repo_id!r} has no config.json: not a transformers model")
    return path


def load(spec: str, *, causal_lm: bool = True, allow_pickle: bool = False, dtype=torch.float32):
    """(model computed by qkv, tokenizer, display name) for a bundled model name or a local
    directory; the tokenizer has ``convert_ids_to_tokens`` and turns a text into inputs when
    called (``tokenizer(text, return_tensors="pt")``).

    ``causal_lm``: the model must predict the next token (an LM head); MiniLM has none.
    """
    if spec in NAMES:
        from qkv.hf import bundled

        if causal_lm and spec == "minilm-l6":
            raise ValueError(
                "minilm-l6 is an encoder without a next-token head; use "
                "smollm2-135m or a causal language model directory"
            )
        model, own = bundled.load(spec, dtype=dtype)
        return model, BundledTokenizer(own), spec
    path = locate(spec, allow_pickle=allow_pickle)
    has_safetensors = any(path.glob("*.safetensors"))
    if not has_safetensors and not allow_pickle:
        raise ValueError(
            f"{spec} has no .safetensors weights; pickle .bin weights can run code "
            f"when loaded, so they load only with --allow-pickle"
        )
    gate.check(path)  # config.json against the weights' headers, before anything is built
    auto = transformers.AutoModelForCausalLM if causal_lm else transformers.AutoModel
    common = dict(local_files_only=True, trust_remote_code=False)
    try:
        model = auto.from_pretrained(
            path, attn_implementation="qkv", dtype=dtype, use_safetensors=has_safetensors, **common
        )
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, **common)
    except pickle.UnpicklingError as e:  # torch's safe loader refused it: it could run code
        raise ValueError(
            f"could not load {spec}: its pickle weights hold what torch's safe loader refuses "
            f"({_refusal(e)}); qkv loads pickle weights through that loader only"
        ) from None
    except (OSError, ValueError, KeyError, RuntimeError) as e:  # (weights that do not fit)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(f"could not load {spec} as a transformers model: {first[:200]}") from None
    return model.eval(), tokenizer, display_name(spec)


def _refusal(error: Exception) -> str:
    """The reason in torch's safe-loader error, without its advice to load the file unsafely."""
    for line in str(error).splitlines():
        line = line.split("WeightsUnpickler error:")[-1].split(". Please")[0].strip()
        advice = ("Weights only load failed", "Check the documentation", "(1)", "(2)", "Please")
        if line and not line.startswith(advice):
            return line[:200]
    return type(error).__name__


def display_name(spec: str) -> str:
    """How a model is named in output: a directory by its folder's name, a hub id as it is."""
    path = Path(spec)
    return path.resolve().name if path.is_dir() else spec


class BundledTokenizer:
    """A bundled model's tokenizer with the calls qkv.hf's surfaces use."""

    def __init__(self, own):
        self.own = own

    def convert_ids_to_tokens(self, ids) -> list[str]:
        return self.own.tokenizer.labels(list(ids))

    def decode(self, ids, **_options) -> str:
        """The text of ``ids`` (special tokens kept, as transformers' options ask here)."""
        return self.own.tokenizer.decode([int(i) for i in ids])

    def __call__(
        self, text: str, return_tensors: str | None = "pt", add_special_tokens: bool = True
    ) -> dict:
        """``input_ids`` and ``attention_mask`` (1, L) tensors (lists when ``return_tensors``
        is None); without special tokens the bare tokenizer's ids."""
        ids = self.own.encode(text)[0] if add_special_tokens else self.own.tokenizer.encode(text)[0]
        if return_tensors is None:
            return {"input_ids": ids, "attention_mask": [1] * len(ids)}
        ids = torch.tensor([ids])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
