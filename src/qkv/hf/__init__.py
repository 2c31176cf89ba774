"""Any transformers model computed, traced and edited by qkv's engine.

    >>> import qkv.hf                      # registers attn_implementation="qkv"
    >>> model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="qkv")
    >>> with qkv.hf.trace(model, tokenizer=tok) as run:
    ...     model(**inputs)                # run: a qkv.models.ModelTrace, one Trace per layer
    >>> qkv.hf.compare(model, inputs, {"3.4": {"ablate": "zero"}})   # next token before/after
    >>> qkv.hf.attribute(model, text, " Mary", baseline=" John", tokenizer=tok).top(3)
    >>> qkv.hf.patching(model, text, other_text, " Mary", baseline=" John", tokenizer=tok)
    >>> qkv.hf.lens(model, text, target=" Mary", tokenizer=tok).target_rank

Needs the ``hf`` extra (``pip install 'qkv[hf]'``: transformers, with torch).
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
    import transformers  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"qkv.hf needs the Python package {e.name!r}, which is not installed: pip install 'qkv[hf]'"
    ) from e

from qkv.hf import taxonomy
from qkv.hf.activation_patching import Patching, patching
from qkv.hf.adapter import NAME, register
from qkv.hf.attribution import Attribution, KeySplit, attribute
from qkv.hf.interventions import Edit, NextToken, compare, intervene
from qkv.hf.logit_lens import Lens, lens
from qkv.hf.session import attention_layers
from qkv.hf.tracing import HFRun, trace

register()

__all__ = [
    "NAME",
    "register",
    "trace",
    "HFRun",
    "intervene",
    "compare",
    "Edit",
    "NextToken",
    "attention_layers",
    "taxonomy",
    "attribute",
    "Attribution",
    "KeySplit",
    "patching",
    "Patching",
    "lens",
    "Lens",
]
