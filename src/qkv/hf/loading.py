"""Load a model for qkv.hf by a bundled name or a local transformers directory, safely.

Local directories load with ``local_files_only`` (nothing fetched), ``trust_remote_code=False``
(no code from the checkpoint runs) and safetensors weights only; pickle ``.bin`` weights load
only with ``allow_pickle=True``, which the command line sets from an explicit flag.
"""

from __future__ import annotations

from pathlib import Path

import torch
import transformers

from qkv.models import NAMES


def load(spec: str, *, causal_lm: bool = True, allow_pickle: bool = False,
         dtype=torch.float32):
    """(model computed by qkv, tokenizer, display name) for a bundled model name or a local
    directory; the tokenizer has ``convert_ids_to_tokens`` and turns a text into inputs when
    called (``tokenizer(text, return_tensors="pt")``).

    ``causal_lm``: the model must predict the next token (an LM head); MiniLM has none.
    """
    if spec in NAMES:
        from qkv.hf import bundled

        if causal_lm and spec == "minilm-l6":
            raise ValueError("minilm-l6 is an encoder without a next-token head; use "
                             "smollm2-135m or a causal language model directory")
        model, own = bundled.load(spec, dtype=dtype)
        return model, BundledTokenizer(own), spec
    path = Path(spec)
    if not path.is_dir() or not (path / "config.json").is_file():
        raise ValueError(f"model must be one of {list(NAMES)} or a local transformers model "
                         f"directory holding config.json, got {spec!r}")
    has_safetensors = any(path.glob("*.safetensors"))
    if not has_safetensors and not allow_pickle:
        raise ValueError(f"{spec} has no .safetensors weights; pickle .bin weights can run code "
                         f"when loaded, so they load only with --allow-pickle")
    auto = transformers.AutoModelForCausalLM if causal_lm else transformers.AutoModel
    common = dict(local_files_only=True, trust_remote_code=False)
    try:
        model = auto.from_pretrained(path, attn_implementation="qkv", dtype=dtype,
                                     use_safetensors=has_safetensors, **common)
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, **common)
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"could not load {spec} as a transformers model: "
                         f"{str(e).splitlines()[0]}") from None
    return model.eval(), tokenizer, path.name


class BundledTokenizer:
    """A bundled model's tokenizer with the two calls qkv.hf's surfaces use."""

    def __init__(self, own):
        self.own = own

    def convert_ids_to_tokens(self, ids) -> list[str]:
        return self.own.tokenizer.labels(list(ids))

    def __call__(self, text: str, return_tensors: str = "pt") -> dict:
        ids, _ = self.own.encode(text)
        ids = torch.tensor([ids])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
