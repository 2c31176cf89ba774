"""The Mini-GPT: a small decoder-only transformer whose attention is qkv's own.

The forward pass is written once for NumPy arrays and torch tensors (train with torch, inspect
with NumPy): learned token and position embeddings, pre-norm blocks of causal multi-head
attention and a GELU MLP, a final norm, and logits tied to the token embedding.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from qkv import masks, steps
from qkv.layers import gelu, layer_norm
from qkv.multihead import INIT_STD, MultiHeadAttention


@dataclass(frozen=True)
class Config:
    vocab: int
    context: int  # longest sequence (learned positions)
    d_model: int = 64
    n_heads: int = 4  # d_head = d_model / n_heads = 16
    n_layers: int = 2
    d_mlp: int = 256  # 4·d_model
    window: int | None = None  # None: causal over all earlier tokens; 2: itself and the previous

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model must be divisible by n_heads, got {self.d_model} and {self.n_heads}"
            )


def init(config: Config, seed: int) -> dict[str, np.ndarray]:
    """Weights drawn from N(0, 0.02²) (norm gains 1, biases 0) with default_rng(seed)."""
    rng = np.random.default_rng(seed)
    c = config
    p = {
        "tok_emb": rng.normal(0, INIT_STD, (c.vocab, c.d_model)),
        "pos_emb": rng.normal(0, INIT_STD, (c.context, c.d_model)),
    }
    for layer in range(c.n_layers):
        mha = MultiHeadAttention(c.d_model, c.n_heads, rng)
        for name, a in mha.parameters().items():
            p[f"{layer}.{name}"] = a
        p[f"{layer}.ln1.g"], p[f"{layer}.ln1.b"] = np.ones(c.d_model), np.zeros(c.d_model)
        p[f"{layer}.ln2.g"], p[f"{layer}.ln2.b"] = np.ones(c.d_model), np.zeros(c.d_model)
        p[f"{layer}.W_in"] = rng.normal(0, INIT_STD, (c.d_model, c.d_mlp))
        p[f"{layer}.b_in"] = np.zeros(c.d_mlp)
        p[f"{layer}.W_out"] = rng.normal(0, INIT_STD, (c.d_mlp, c.d_model))
        p[f"{layer}.b_out"] = np.zeros(c.d_model)
    p["ln_f.g"], p["ln_f.b"] = np.ones(c.d_model), np.zeros(c.d_model)
    return p


def attention_layer(p: dict, layer: int) -> MultiHeadAttention:
    w = {n: p[f"{layer}.{n}"] for n in ("W_Q", "W_K", "W_V", "W_O", "b_O")}
    return MultiHeadAttention.from_weights(**w)


def window_mask(T: int, window: int | None):
    """(T, T) True = may attend: causal, and with ``window`` only the last ``window`` keys
    (window 2: each position sees itself and the previous token, no attention further back)."""
    m = masks.causal(T)  # (T, T)
    if window is not None:
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        m = m & (j > i - window)  # (T, T)
    return m


def forward(
    p: dict,
    ids,
    config: Config,
    *,
    scale=None,
    temperature: float = 1.0,
    return_traces: bool = False,
    ablate: dict | None = None,
):
    """Logits (B, T, vocab) for token ids (B, T); with return_traces, also one Trace per layer.

    ablate {(layer, head): None or (d_head,)}: that head's z is replaced by 0 (None) or by the
    given vector (mean ablation) before W_O; NumPy only.
    """
    T = ids.shape[-1]
    if T > config.context:
        raise ValueError(f"at most {config.context} tokens fit the Mini-GPT, got {T}")
    x = p["tok_emb"][ids] + p["pos_emb"][:T]  # (B, T, d_model)
    mask = steps.to_device_of(window_mask(T, config.window), x)  # (T, T)
    ablate = ablate or {}
    traces = []
    for layer in range(config.n_layers):
        h = layer_norm(x, p[f"{layer}.ln1.g"], p[f"{layer}.ln1.b"])
        mha = attention_layer(p, layer)
        cut = {hd: r for (ly, hd), r in ablate.items() if ly == layer}
        # backend="reference": the traced path's code, also when no trace is kept
        a = mha(
            h,
            mask=mask,
            scale=scale,
            temperature=temperature,
            return_trace=return_traces or bool(cut),
            backend="reference",
        )
        if return_traces or cut:
            a, tr = a
            traces.append(tr)
        if cut:
            z = np.array(tr.z)  # (B, n_heads, T, d_head)
            for head, r in cut.items():
                z[:, head] = 0.0 if r is None else r
            a = steps.project_out(z, mha.W_O, mha.b_O)[1]  # (B, T, d_model)
        x = x + a
        h = layer_norm(x, p[f"{layer}.ln2.g"], p[f"{layer}.ln2.b"])
        h = gelu(h @ p[f"{layer}.W_in"] + p[f"{layer}.b_in"])  # (B, T, d_mlp)
        x = x + h @ p[f"{layer}.W_out"] + p[f"{layer}.b_out"]  # (B, T, d_model)
    x = layer_norm(x, p["ln_f.g"], p["ln_f.b"])
    logits = x @ p["tok_emb"].T  # (B, T, d_model) @ (d_model, vocab) -> (B, T, vocab)
    return (logits, traces) if return_traces else logits


def save(path, p: dict, config: Config, meta: dict | None = None) -> None:
    """A small .npz checkpoint: the weights (float32) plus the config and notes as JSON."""
    arrays = {k: np.asarray(v, dtype=np.float32) for k, v in p.items()}
    info = json.dumps({"config": asdict(config), "meta": meta or {}})
    with open(path, "wb") as f:
        # numpy's stub lets **arrays fill the bool allow_pickle; the keys are weight names
        np.savez_compressed(f, __info__=np.array(info), **arrays)  # type: ignore[arg-type]


def load(path) -> tuple[dict, Config, dict]:
    """Weights (float64 NumPy), Config and notes from a checkpoint written by ``save``."""
    try:
        data = np.load(path, allow_pickle=False)
        info = json.loads(str(data["__info__"]))
    except FileNotFoundError:
        raise
    except (OSError, KeyError, ValueError) as e:
        raise ValueError(
            f"{path} is not a qkv Mini-GPT checkpoint (.npz from 'qkv lab train'): {e}"
        ) from None
    p = {k: data[k].astype(np.float64) for k in data.files if k != "__info__"}
    return p, Config(**info["config"]), info["meta"]
