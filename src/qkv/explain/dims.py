"""Sizes, parameters, FLOPs and memory of attention for one configuration.

    d_head = d_model / n_heads          scores per head = T²        per layer = n_heads·T²
    params = W_Q (d_model × n_heads·d_head) + W_K, W_V (d_model × n_kv_heads·d_head)
             + W_O (n_heads·d_head × d_model) [+ biases]
    FLOPs  = 2·T·d_model·(n_heads + 2·n_kv_heads)·d_head (Q, K, V)
             + 2·T·n_heads·d_head·d_model (W_O)
             + 2·n_heads·T²·d_head (q·kᵀ) + 2·n_heads·T²·d_head (weights·v)
    KV cache per token = 2·n_kv_heads·d_head·layers values

FLOPs count a multiply-add as 2 and cover the matrix products only (softmax, masking and biases
add O(T²) or O(T·d) more and are left out).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources

from qkv.checks import positive_int
from qkv.explain.format import Section, Table, section

BYTES = {"float32": 4, "bfloat16": 2}


@dataclass(frozen=True)
class AttentionDims:
    """One attention configuration; derived sizes are properties, never stored twice."""

    d_model: int
    n_heads: int
    n_kv_heads: int | None = None  # None: as many K/V heads as query heads; fewer = grouped-query
    context: int = 1024  # T: tokens one forward pass attends over
    layers: int = 1
    qkv_bias: bool = False
    out_bias: bool = False
    name: str | None = None
    note: str = ""  # where the numbers come from

    def __post_init__(self):
        for field_name in ("d_model", "n_heads", "context", "layers"):
            positive_int(field_name, getattr(self, field_name))
        if self.n_kv_heads is not None:
            positive_int("n_kv_heads", self.n_kv_heads)
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={self.d_model}, "
                f"n_heads={self.n_heads} (d_model / n_heads = "
                f"{self.d_model / self.n_heads:.4g})"
            )
        if self.n_heads % self.kv_heads:
            raise ValueError(
                f"n_heads must be divisible by n_kv_heads, got n_heads="
                f"{self.n_heads}, n_kv_heads={self.kv_heads}"
            )

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def sqrt_d_head(self) -> float:
        return math.sqrt(self.d_head)

    def parameters(self) -> dict[str, int]:
        """Parameter counts of one attention layer by weight name (biases only when present)."""
        d, q_width, kv_width = self.d_model, self.n_heads * self.d_head, self.kv_heads * self.d_head
        p = {"W_Q": d * q_width, "W_K": d * kv_width, "W_V": d * kv_width, "W_O": q_width * d}
        if self.qkv_bias:
            p.update(b_Q=q_width, b_K=kv_width, b_V=kv_width)
        if self.out_bias:
            p["b_O"] = d
        return p

    @property
    def params_per_layer(self) -> int:
        return sum(self.parameters().values())

    @property
    def scores_per_head(self) -> int:
        return self.context**2

    @property
    def scores_per_layer(self) -> int:
        return self.n_heads * self.context**2

    def flops(self) -> dict[str, int]:
        """Forward matmul FLOPs of one layer at context T, by part."""
        T, d, dh, H, G = self.context, self.d_model, self.d_head, self.n_heads, self.kv_heads
        return {
            "Q, K, V projections": 2 * T * d * (H + 2 * G) * dh,
            "W_O projection": 2 * T * H * dh * d,
            "scores q·kᵀ": 2 * H * T * T * dh,
            "weights·v": 2 * H * T * T * dh,
        }

    def kv_cache_values_per_token(self) -> int:
        """Numbers a KV cache keeps per token, over all layers: one k and one v per K/V head."""
        return 2 * self.kv_heads * self.d_head * self.layers

    def to_dict(self) -> dict:
        f = self.flops()
        return {
            "name": self.name,
            "d_model": self.d_model,
            "n_heads": self.n_heads,
            "n_kv_heads": self.kv_heads,
            "d_head": self.d_head,
            "sqrt_d_head": self.sqrt_d_head,
            "context": self.context,
            "layers": self.layers,
            "parameters": self.parameters(),
            "params_per_layer": self.params_per_layer,
            "params_all_layers": self.params_per_layer * self.layers,
            "scores_per_head": self.scores_per_head,
            "scores_per_layer": self.scores_per_layer,
            "score_bytes_per_layer": {k: b * self.scores_per_layer for k, b in BYTES.items()},
            "flops_per_layer": f,
            "flops_per_layer_total": sum(f.values()),
            "kv_cache_bytes_per_token": {
                k: b * self.kv_cache_values_per_token() for k, b in BYTES.items()
            },
        }


def _known() -> dict[str, AttentionDims]:
    """The configurations of ``dims.json`` (the tutorials' and the real models'; layers where
    known), keyed by name."""
    table = json.loads(resources.files("qkv.explain").joinpath("dims.json").read_text("utf-8"))
    return {row["name"]: AttentionDims(**row) for row in table}


MODELS = _known()


def model(name: str) -> AttentionDims:
    """A known configuration by name (see ``MODELS``)."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {list(MODELS)}") from None


def count(n: int) -> str:
    return f"{n:,}"


def nbytes(n: int) -> str:
    """1,048,576 B (1.00 MiB)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n:,} B ({n / size:.2f} {unit})"
    return f"{n:,} B"


def sections(c: AttentionDims) -> list[Section]:
    """The configuration told as sections: sizes, parameters, scores, FLOPs, KV cache."""
    H, G, T, dh = c.n_heads, c.kv_heads, c.context, c.d_head
    title = c.name or f"d_model {c.d_model}, {H} heads"
    head = [
        f"d_model = {c.d_model}, n_heads = {H}, n_kv_heads = {G}, context T = {count(T)}, "
        f"layers = {c.layers}"
    ] + ([c.note] if c.note else [])
    sizes = [
        f"d_head = d_model / n_heads = {c.d_model} / {H} = {dh}",
        f"√d_head = √{dh} = {c.sqrt_d_head:.2f}  (every score is divided by it)",
    ]
    if G != H:
        sizes.append(
            f"grouped-query attention: {G} K/V heads, each shared by {H // G} query "
            f"heads, so K and V are {G}·{dh} = {G * dh} wide instead of {H * dh}"
        )

    shapes = {
        "W_Q": (c.d_model, H * dh),
        "W_K": (c.d_model, G * dh),
        "W_V": (c.d_model, G * dh),
        "W_O": (H * dh, c.d_model),
        "b_Q": (H * dh,),
        "b_K": (G * dh,),
        "b_V": (G * dh,),
        "b_O": (c.d_model,),
    }
    params = c.parameters()
    rows = [(n, " × ".join(str(s) for s in shapes[n]), count(p)) for n, p in params.items()]
    rows.append(("total", "", count(c.params_per_layer)))
    if c.layers > 1:
        rows.append((f"× {c.layers} layers", "", count(c.params_per_layer * c.layers)))
    no_bias = "" if c.qkv_bias or c.out_bias else "no biases"

    mem = [
        (f"score matrix, {dt}", nbytes(b * c.scores_per_head), nbytes(b * c.scores_per_layer))
        for dt, b in BYTES.items()
    ]
    scores = Table(
        ("", "per head", f"per layer ({H} heads)"),
        (
            (
                "scores",
                f"{count(T)} × {count(T)} = {count(c.scores_per_head)}",
                count(c.scores_per_layer),
            ),
            *mem,
        ),
    )

    f = c.flops()
    formulas = {
        "Q, K, V projections": "2·T·d_model·(H + 2G)·d_head",
        "W_O projection": "2·T·H·d_head·d_model",
        "scores q·kᵀ": "2·H·T²·d_head",
        "weights·v": "2·H·T²·d_head",
    }
    frows = [(part, formulas[part], count(n)) for part, n in f.items()]
    linear = f["Q, K, V projections"] + f["W_O projection"]
    quadratic = f["scores q·kᵀ"] + f["weights·v"]
    frows.append(("total per layer", "", count(linear + quadratic)))
    if c.layers > 1:
        frows.append((f"× {c.layers} layers", "", count((linear + quadratic) * c.layers)))

    kv = c.kv_cache_values_per_token()
    kv_lines = [
        f"2 (k and v) × {G} K/V heads × d_head {dh} × {c.layers} "
        f"layer{'s' if c.layers > 1 else ''} = {count(kv)} "
        f"numbers per token"
    ]
    kv_lines += [
        f"{dt}: {nbytes(b * kv)} per token, {nbytes(b * kv * T)} for T = {count(T)}"
        for dt, b in BYTES.items()
    ]
    return [
        Section(title, tuple(head)),
        Section("sizes", tuple(sizes)),
        section(
            "parameters of one attention layer" + (f" ({no_bias})" if no_bias else ""),
            Table(("weight", "shape", "parameters"), tuple(rows)),
            f"W_Q + W_K + W_V = {count(params['W_Q'] + params['W_K'] + params['W_V'])}; "
            f"W_O = {count(params['W_O'])}",
        ),
        section(f"scores at context T = {count(T)}", scores),
        section(
            f"forward FLOPs at T = {count(T)} (matmuls, 2 per multiply-add)",
            Table(("part", "formula", "FLOPs"), tuple(frows)),
            f"the T² part (q·kᵀ and weights·v) is {100 * quadratic / (linear + quadratic):.1f}%"
            f" of it; it grows with T², the projections only with T",
        ),
        Section("KV cache", tuple(kv_lines)),
    ]
