"""A decoder-only transformers model read as a residual stream: what each layer adds to it.

    residual = embed + Σ_layers (attention's output + the MLP's output)
    logits   = W_U · final_norm(residual) + b_U

Every layer's attention output is o_proj(z) = Σ_h z_h W_O^h + b_O: head h's part is its z (the
o_proj input's slice h) through its slice of W_O. Layers that norm what they add (Gemma 2 and 3,
OLMo 2: a norm after the attention and after the MLP) are read the same way, through that norm.

``Anatomy`` finds these modules by the names transformers gives them (Llama, Qwen2, Mistral,
Gemma, Phi-3, GPT-2 and their kin); a model without them gets a ValueError naming what is
missing. ``Frozen`` is a norm with the scale of one real input held fixed: a linear map, so
parts pushed through it sum to what the whole is pushed to.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from qkv.hf.session import attention_layers

# what transformers names each part, in the order tried
OUT_PROJ = ("o_proj", "c_proj", "out_proj", "dense")
MLP = ("mlp", "feed_forward", "ffn", "block_sparse_moe")
FINAL_NORM = ("norm", "ln_f", "final_layernorm", "final_layer_norm", "norm_f")
EXPECTED = (
    "direct logit attribution reads decoder-only language models with a final norm and an "
    "unembedding (Llama, Qwen2, Mistral, Gemma, Phi-3, GPT-2 and their kin)"
)


@dataclass
class Block:
    """One decoder layer's modules: ``attention`` (its output is o_proj's), ``out_proj`` (W_O),
    ``mlp``, and the norms applied to what they add (None when the layer adds them as is)."""

    layer: torch.nn.Module
    attention: torch.nn.Module
    out_proj: torch.nn.Module
    mlp: torch.nn.Module
    attn_after: torch.nn.Module | None
    mlp_after: torch.nn.Module | None


@dataclass
class Anatomy:
    """The modules of a causal language model that attribution reads; ``n_heads`` query heads of
    ``d_head`` numbers each feed every out_proj."""

    name: str
    base: torch.nn.Module  # the model without its LM head: its output is final_norm's
    blocks: list[Block]
    final_norm: torch.nn.Module
    unembed: torch.nn.Module  # the LM head: logits = W_U · x + b_U
    n_heads: int
    d_head: int
    softcap: float | None  # a final logit soft-cap (Gemma 2): logits = c·tanh(logits / c)

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    def W_O(self, index: int) -> torch.Tensor:
        """Layer ``index``'s out_proj as a (n_heads·d_head, d_model) matrix: o = z @ W_O + b_O."""
        return linear_matrix(self.blocks[index].out_proj)

    def b_O(self, index: int) -> torch.Tensor | None:
        return getattr(self.blocks[index].out_proj, "bias", None)

    def W_U(self) -> torch.Tensor:
        """(vocab, d_model)."""
        weight = self.unembed.weight
        if not isinstance(weight, torch.Tensor):
            raise ValueError(f"{EXPECTED}; {self.name}'s LM head holds no weight matrix")
        return weight

    def b_U(self) -> torch.Tensor | None:
        return getattr(self.unembed, "bias", None)

    def logits(self, normed: torch.Tensor) -> torch.Tensor:
        """The model's own logits of final-norm outputs (..., d_model) -> (..., vocab), soft-cap
        included."""
        out = self.unembed(normed)
        if self.softcap:
            out = torch.tanh(out / self.softcap) * self.softcap
        return out


def linear_matrix(module) -> torch.Tensor:
    """A projection's weight as (in, out), for nn.Linear (stored (out, in)) and GPT-2's Conv1D
    (stored (in, out))."""
    if isinstance(module, torch.nn.Linear):
        return module.weight.T
    if type(module).__name__ == "Conv1D":
        return module.weight
    raise ValueError(f"{EXPECTED}; its output projection is a {type(module).__name__}")


def _child(module, names):
    for name in names:
        found = getattr(module, name, None)
        if isinstance(found, torch.nn.Module):
            return found
    return None


def read(model) -> Anatomy:
    """The ``Anatomy`` of ``model``, or a ValueError naming what it lacks."""
    config = model.config
    kind = f"{getattr(config, 'model_type', 'model')} ({type(model).__name__})"
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(f"{EXPECTED}; {kind} is an encoder-decoder model")
    unembed = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if unembed is None or getattr(unembed, "weight", None) is None:
        raise ValueError(
            f"{EXPECTED}; {kind} has no unembedding (an LM head): load it as a causal LM "
            f"(AutoModelForCausalLM)"
        )
    base = model.base_model
    final_norm = _child(base, FINAL_NORM)
    if final_norm is None:
        raise ValueError(f"{EXPECTED}; {kind} has no final norm (looked for {FINAL_NORM})")
    modules = dict(model.named_modules())
    blocks = []
    for name, attention in attention_layers(model):
        parent = modules[name.rpartition(".")[0]]
        out_proj, mlp = _child(attention, OUT_PROJ), _child(parent, MLP)
        if out_proj is None or mlp is None:
            what = f"an output projection {OUT_PROJ}" if out_proj is None else f"an MLP {MLP}"
            raise ValueError(f"{EXPECTED}; {kind}'s layer {name} has no {what}")
        post = _child(parent, ("post_feedforward_layernorm",))  # then the attention's is post too
        attn_after = _child(parent, ("post_attention_layernorm",)) if post is not None else None
        blocks.append(Block(parent, attention, out_proj, mlp, attn_after, post))
    if not blocks:
        raise ValueError(f"{EXPECTED}; {kind} has no attention layer that qkv can find")
    width = linear_matrix(blocks[0].out_proj).shape[0]
    n_heads = config.num_attention_heads if hasattr(config, "num_attention_heads") else None
    if not n_heads or width % n_heads:
        raise ValueError(f"{EXPECTED}; {kind}'s out_proj input ({width}) is not n_heads × d_head")
    softcap = getattr(config, "final_logit_softcapping", None)
    return Anatomy(kind, base, blocks, final_norm, unembed, n_heads, width // n_heads, softcap)


@dataclass
class Frozen:
    """A norm with the scale of one real input y frozen: u ↦ center(u) ⊙ gain + bias, where
    gain = weight / rms(y) (RMSNorm) or weight / std(y) (LayerNorm, which also centers u)."""

    gain: torch.Tensor  # (d_model,) float64
    center: bool
    bias: torch.Tensor | None

    def back(self, d: torch.Tensor) -> torch.Tensor:
        """The direction d (d_model,) read before the norm: (u ↦ frozen(u) · d) = (u ↦ u · back(d))."""
        out = self.gain * d
        return out - out.mean() if self.center else out


def freeze(norm, y: torch.Tensor) -> Frozen:
    """``norm`` (an RMSNorm, Gemma's (1 + weight) RMSNorm or a LayerNorm) with the scale of its
    real input ``y`` (d_model,); checked: the frozen map of y must give the norm's own output."""
    x = y.double()
    weight = getattr(norm, "weight", None)
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
    if eps is None:
        raise ValueError(f"{EXPECTED}; its norm {type(norm).__name__} has no epsilon to read")
    center = isinstance(norm, torch.nn.LayerNorm)
    if center:
        x = x - x.mean()
    scale = 1.0 / torch.sqrt((x * x).mean() + eps)
    bias = getattr(norm, "bias", None) if center else None
    bias = None if bias is None else bias.detach().double()
    with torch.no_grad():
        own = norm(y[None])[0].double()
    one = torch.ones_like(x)
    w = one if weight is None else weight.detach().double()
    for gain in (w, 1.0 + w):  # Gemma's RMSNorms multiply by (1 + weight)
        frozen = Frozen(scale * gain, center, bias)
        got = x * frozen.gain + (0.0 if bias is None else bias)
        if torch.allclose(got, own, rtol=1e-3, atol=1e-3 * float(own.abs().max()) + 1e-6):
            return frozen
    raise ValueError(
        f"{EXPECTED}; its norm {type(norm).__name__} is neither an RMSNorm nor a LayerNorm "
        f"as qkv reads them (its output differs from x·weight/rms(x))"
    )
