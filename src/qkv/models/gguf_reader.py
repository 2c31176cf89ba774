"""Read a llama-architecture GGUF file into float32 NumPy arrays with the checkpoint's layout.

GGUF stores each matrix as (out_features, in_features) rows, quantized in blocks (Q4_1: 32
weights share one scale and one minimum; Q8_0: one scale). ``gguf.quants.dequantize`` turns them
back into float32. llama.cpp's converter also permutes the rows of the query and key matrices
so that RoPE rotates *adjacent* pairs (x₀,x₁), (x₂,x₃)…; we undo that permutation, so each head's
rows are in the original order where RoPE rotates the two halves (x_i, x_{i+d/2}) together.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from qkv.models import quantized
from qkv.models.packages import require

CONFIG_KEYS = {  # GGUF metadata key (after "llama.") -> our name
    "block_count": "n_layers",
    "context_length": "n_ctx",
    "embedding_length": "d_model",
    "feed_forward_length": "d_mlp",
    "attention.head_count": "n_heads",
    "attention.head_count_kv": "n_kv_heads",
    "rope.freq_base": "rope_base",
    "attention.layer_norm_rms_epsilon": "eps",
}


def read(
    path: Path, *, model: str, packed: bool = False
) -> tuple[dict, dict[str, np.ndarray], dict[str, quantized.Packed]]:
    """(metadata, tensors, packed): metadata holds CONFIG_KEYS' values plus the tokenizer
    fields; tensors map GGUF names (``blk.0.attn_q.weight``) to float32 arrays (out, in); with
    ``packed``, packed maps the names of Q4_1/Q8_0 matrices to the same weights as codes
    (``models/quantized.py``; W = tensors[name].T), else it is empty."""
    gguf = require("gguf", model=model)
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(str(path))
    arch = reader.fields["general.architecture"].contents()
    if arch != "llama":
        raise ValueError(f"expected a GGUF file of architecture 'llama', got {arch!r} in {path}")
    meta = {ours: reader.fields[f"llama.{key}"].contents() for key, ours in CONFIG_KEYS.items()}
    for key in ("tokens", "merges", "bos_token_id", "eos_token_id", "token_type"):
        field = reader.fields.get(f"tokenizer.ggml.{key}")
        meta[key] = None if field is None else field.contents()
    tensors, codes = {}, {}
    for t in reader.tensors:
        a = dequantize(t.data, t.tensor_type)  # (out, in) float32, or (n,) for norms
        tensors[t.name] = _in_order(t.name, np.ascontiguousarray(a, dtype=np.float32), meta)
        if packed and t.tensor_type.name in quantized.KINDS:  # rows (out, bytes): reordered alike
            rows = _in_order(t.name, np.asarray(t.data), meta)
            codes[t.name] = quantized.from_gguf(t.tensor_type.name, rows)
    return meta, tensors, codes


def _in_order(name: str, rows: np.ndarray, meta: dict) -> np.ndarray:
    """A query or key matrix's rows (float32 or raw blocks) back in their original order."""
    if name.endswith("attn_q.weight"):
        return unpermute(rows, meta["n_heads"])
    if name.endswith("attn_k.weight"):
        return unpermute(rows, meta["n_kv_heads"])
    return rows


def unpermute(W: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's RoPE row permutation of a query/key matrix W (n_heads·d_head, d_in),
    float32 or its raw quantized rows (one row per output feature either way).

    Within each head the stored row order is (pair i, member s) and the original order is
    (member s, pair i): row s·d_head/2 + i of the original sits at row 2·i + s of the file.
    """
    rows, cols = W.shape
    half = rows // n_heads // 2
    W = W.reshape(n_heads, half, 2, cols)  # (heads, pair i, member s, d_in) as stored
    W = W.swapaxes(1, 2)  # (heads, member s, pair i, d_in): the original order
    return np.ascontiguousarray(W.reshape(rows, cols))
