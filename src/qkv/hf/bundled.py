"""The two bundled models (``qkv.models``) as transformers models, computed by qkv.

MiniLM ships a transformers checkpoint (config.json + model.safetensors) in its weight package
and loads as is; SmolLM2 ships a GGUF file, so its weights, as qkv's own loader reads them, are
copied into a ``LlamaForCausalLM`` built from the matching ``LlamaConfig``.
"""

from __future__ import annotations

import numpy as np
import torch
import transformers

from qkv.models import NAMES
from qkv.models import load as load_qkv
from qkv.models.packages import data_file


def load(name: str, *, dtype=torch.float32, attn: str = "qkv"):
    """(transformers model, qkv's own model) for a bundled model name (``qkv.models.names()``);
    the transformers model computes attention with ``attn``. Weights in ``dtype``."""
    if name not in NAMES:
        raise ValueError(f"unknown model {name!r}; choose one of {list(NAMES)}")
    own = load_qkv(name, dtype=np.float64 if dtype == torch.float64 else np.float32)
    return from_own(own, dtype=dtype, attn=attn), own


def from_own(own, *, dtype=torch.float32, attn: str = "qkv"):
    """The transformers model of an already loaded bundled model ``own``."""
    if own.name == "minilm-l6":
        package = NAMES[own.name][1].replace("-", "_")
        path = data_file(package, "model/config.json", model=own.name).parent
        model = transformers.AutoModel.from_pretrained(
            path, attn_implementation=attn, dtype=dtype, use_safetensors=True
        )
    else:
        model = _smollm2(own, dtype=dtype, attn=attn)
    return model.eval()


def _smollm2(own, *, dtype, attn):
    b0 = own.blocks[0]
    config = transformers.LlamaConfig(
        vocab_size=own.E_token.shape[0],
        hidden_size=own.d_model,
        intermediate_size=b0.W_gate.shape[1],
        num_hidden_layers=own.n_layers,
        num_attention_heads=own.n_heads,
        num_key_value_heads=own.n_kv_heads,
        max_position_embeddings=own.max_tokens,
        rms_norm_eps=own.eps,
        rope_parameters={"rope_type": "default", "rope_theta": own.rope_base},
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=own.eos_id,
        pad_token_id=own.pad_id,
    )
    model = transformers.LlamaForCausalLM._from_config(
        config, attn_implementation=attn, dtype=dtype
    )

    def rows(W):  # (heads, d_model, d_head) -> (heads·d_head, d_model), nn.Linear's layout
        return W.transpose(0, 2, 1).reshape(-1, W.shape[1])

    state = {"model.embed_tokens.weight": own.E_token, "model.norm.weight": own.final_norm}
    for i, blk in enumerate(own.blocks):
        p = f"model.layers.{i}."
        state |= {
            p + "input_layernorm.weight": blk.attn_norm,
            p + "self_attn.q_proj.weight": rows(blk.W_Q),
            p + "self_attn.k_proj.weight": rows(blk.W_K),
            p + "self_attn.v_proj.weight": rows(blk.W_V),
            p + "self_attn.o_proj.weight": blk.W_O.reshape(-1, own.d_model).T,  # (D, H·d)
            p + "post_attention_layernorm.weight": blk.mlp_norm,
            p + "mlp.gate_proj.weight": blk.W_gate.T,
            p + "mlp.up_proj.weight": blk.W_up.T,
            p + "mlp.down_proj.weight": blk.W_down.T,
        }
    tensors = {k: torch.from_numpy(np.array(v)).to(dtype) for k, v in state.items()}  # a copy
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise RuntimeError(
            f"SmolLM2's weights do not fit LlamaForCausalLM: missing {missing}, "
            f"unexpected {unexpected}"
        )
    model.tie_weights()
    return model
