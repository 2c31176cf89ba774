"""transformers' Llama on SmolLM2's own weights: the peer for ``qkv bench --model``.

The model is built from a ``LlamaConfig`` with qkv's SmolLM2 sizes and filled with the very
float32 arrays qkv runs (dequantized from the same GGUF file), so both sides compute the same
function and any gap in speed is the code's, not the weights'.
"""

from __future__ import annotations

import time
from typing import Required, TypedDict

import numpy as np


class Generate(TypedDict, total=False):
    """The settings of one transformers peer (``greedy_run``'s keywords)."""

    attn: Required[str]
    traced: bool
    attentions: bool


def missing(*, qkv_attention: bool = False) -> str | None:
    """Why the transformers peers (with ``qkv_attention``: those running
    ``attn_implementation="qkv"``, ``qkv.hf``) cannot run here, or None when they can."""
    for name, extra in (("torch", "torch"), ("transformers", "hf")):
        try:
            __import__(name)
        except ImportError:
            return f"{name} is not installed (pip install 'qkv[{extra}]')"
    if qkv_attention:
        try:
            import qkv.hf  # noqa: F401  (registers attn_implementation="qkv")
        except ImportError as e:
            return str(e)
    return None


def llama_from(model):
    """A ``transformers.LlamaForCausalLM`` (float32, eval mode) holding ``model``'s weights
    (a ``qkv.models.smollm2.SmolLM2``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    H, G, d = model.n_heads, model.n_kv_heads, model.d_head
    config = LlamaConfig(
        vocab_size=model.E_token.shape[0],
        hidden_size=model.d_model,
        intermediate_size=model.blocks[0].W_gate.shape[1],
        num_hidden_layers=model.n_layers,
        num_attention_heads=H,
        num_key_value_heads=G,
        head_dim=d,
        rms_norm_eps=model.eps,
        rope_parameters={"rope_type": "default", "rope_theta": float(model.rope_base)},
        max_position_embeddings=model.max_tokens,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=model.eos_id,
        pad_token_id=model.pad_id,
    )
    llama = LlamaForCausalLM(config).float().eval()

    def t(a):  # qkv stores (in, out); torch's Linear holds (out, in)
        return torch.from_numpy(np.array(a, dtype=np.float32))  # a writable copy

    state = {
        "model.embed_tokens.weight": t(model.E_token),
        "model.norm.weight": t(model.final_norm),
    }
    for i, blk in enumerate(model.blocks):
        p = f"model.layers.{i}."
        W_Q, W_K, W_V = np.split(blk.W_QKV, [H * d, (H + G) * d], axis=1)  # (d_model, ·) each
        state |= {
            p + "self_attn.q_proj.weight": t(W_Q.T),
            p + "self_attn.k_proj.weight": t(W_K.T),
            p + "self_attn.v_proj.weight": t(W_V.T),
            p + "self_attn.o_proj.weight": t(blk.W_O.T),
            p + "mlp.gate_proj.weight": t(blk.W_gate.T),
            p + "mlp.up_proj.weight": t(blk.W_up.T),
            p + "mlp.down_proj.weight": t(blk.W_down.T),
            p + "input_layernorm.weight": t(blk.attn_norm),
            p + "post_attention_layernorm.weight": t(blk.mlp_norm),
        }
    state["lm_head.weight"] = state["model.embed_tokens.weight"]  # tied
    llama.load_state_dict(state, strict=True)
    return llama


def greedy_run(
    llama, ids, new_tokens: int, attn: str, *, traced: bool = False, attentions: bool = False
) -> tuple[list[int], float, float]:
    """transformers' ``generate`` (greedy, no early stop) with attention ``attn`` ("sdpa",
    "eager" or "qkv"): (new ids, seconds to the first new token, seconds in all). ``traced``
    runs it inside ``qkv.hf.trace`` (every layer's steps kept, "qkv" only); ``attentions``
    asks generate for every step's weights (``output_attentions=True``,
    ``return_dict_in_generate=True``)."""
    import contextlib

    import torch
    from transformers.generation.streamers import BaseStreamer

    class Clock(BaseStreamer):  # generate hands it the prompt first, then each new token
        def __init__(self):
            self.calls = []

        def put(self, value):
            self.calls.append(time.perf_counter())

        def end(self):
            pass

    llama.set_attn_implementation(attn)
    clock = Clock()
    x = torch.tensor([list(ids)], dtype=torch.long)  # (1, L)
    extra = {"output_attentions": True, "return_dict_in_generate": True} if attentions else {}
    recording: contextlib.AbstractContextManager
    if traced:
        import qkv.hf

        recording = qkv.hf.trace(llama)
    else:
        recording = contextlib.nullcontext()
    with torch.inference_mode():
        t0 = time.perf_counter()
        with recording:  # a trace is finished (per-sequence traces cut) when the block ends
            out = llama.generate(
                x,
                attention_mask=torch.ones_like(x),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                streamer=clock,
                pad_token_id=llama.config.pad_token_id,
                **extra,
            )
        total = time.perf_counter() - t0
    out = out.sequences if attentions else out  # (1, L + new_tokens)
    first = clock.calls[1] - t0 if len(clock.calls) > 1 else total
    return out[0, len(ids) :].tolist(), first, total
