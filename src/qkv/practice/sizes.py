"""Size exercises: d_head, √d_head, scores per head, parameters, KV-cache bytes.

Every answer comes from ``qkv.explain.dims.AttentionDims``; every worked solution from its report.
"""

from __future__ import annotations

from qkv.explain import dims
from qkv.explain.dims import AttentionDims, count

# (name, d_model, n_heads) the tutorials use, plus sizes drawn at random below
NAMED = [
    (name, m.d_model, m.n_heads)
    for name, m in dims.MODELS.items()
    if name.startswith("andrea") or name in ("gpt2-small", "mini-gpt")
]
D_HEADS = (16, 32, 48, 64, 80, 96, 128)
N_HEADS = (2, 4, 6, 8, 12, 16, 20, 24, 32)
CONTEXTS = (64, 100, 128, 256, 500, 512, 1000, 1024, 2048, 4096)


def _config(rng, *, context: int = 1024, grouped: bool = False, layers: int = 1) -> AttentionDims:
    """A named configuration half of the time, else d_model = d_head·n_heads drawn at random."""
    if rng.random() < 0.5:
        name, d_model, n_heads = NAMED[rng.integers(len(NAMED))]
    else:
        name = None
        n_heads = int(rng.choice(N_HEADS))
        d_model = int(rng.choice(D_HEADS)) * n_heads
    n_kv = None
    if grouped:
        divisors = [g for g in range(1, n_heads) if n_heads % g == 0]
        n_kv = int(rng.choice(divisors)) if divisors else None
    return AttentionDims(
        int(d_model), int(n_heads), n_kv_heads=n_kv, context=context, layers=layers, name=name
    )


TITLES = {"gpt2-small": "GPT-2 small", "mini-gpt": "the Mini-GPT"}


def _who(c: AttentionDims) -> str:
    if not c.name:
        return f"a model with d_model = {c.d_model} and {c.n_heads} heads"
    title = TITLES.get(c.name, c.name.upper())
    return f"{title} (d_model = {c.d_model}, {c.n_heads} heads)"


def _sizes_lines(c: AttentionDims) -> tuple[str, ...]:
    return dims.sections(c)[1].lines  # "d_head = d_model / n_heads = …", "√d_head = …"


def d_head(rng) -> dict:
    c = _config(rng)
    return dict(
        prompt=f"For {_who(c)}, how large is d_head, the length of each head's q, k and v "
        f"vectors (d_model is split evenly over the heads)?",
        answer_type="number",
        answer=c.d_head,
        hint="Each head gets an equal slice of d_model.",
        solution=_sizes_lines(c)[:1] + ("Concatenating the heads gives back d_model numbers.",),
        data={"d_model": c.d_model, "n_heads": c.n_heads},
    )


def sqrt_d_head(rng) -> dict:
    c = _config(rng)
    return dict(
        prompt=f"For {_who(c)}, every score q·k is divided by √d_head. What is √d_head?",
        answer_type="number",
        answer=c.sqrt_d_head,
        tol=0.01,
        hint="First find d_head = d_model / n_heads, then take its square root.",
        solution=_sizes_lines(c)
        + (
            "q·k sums d_head products, so its spread grows like "
            "√d_head; dividing by it keeps scores near unit size.",
        ),
        data={"d_model": c.d_model, "n_heads": c.n_heads},
    )


def scores_count(rng) -> dict:
    T = int(rng.choice(CONTEXTS))
    c = _config(rng, context=T)
    per_layer = bool(rng.random() < 0.4)
    answer = c.scores_per_layer if per_layer else c.scores_per_head
    where = f"in one layer (all {c.n_heads} heads together)" if per_layer else "in one head"
    lines = [
        f"every one of the T = {T} queries scores every one of the T = {T} keys: "
        f"T² = {T}·{T} = {count(c.scores_per_head)} per head"
    ]
    if per_layer:
        lines.append(f"× {c.n_heads} heads = {count(c.scores_per_layer)} per layer")
    lines.append("this count grows with T², the reason long contexts are expensive")
    return dict(
        prompt=f"{_who(c)[0].upper() + _who(c)[1:]} reads a context of T = {T} tokens. "
        f"How many attention scores q·k does it compute {where}?",
        answer_type="number",
        answer=answer,
        rel=0.005,
        hint="Each query is compared with each key; with self-attention there are T of each.",
        solution=tuple(lines),
        data={"d_model": c.d_model, "n_heads": c.n_heads, "context": T, "per_layer": per_layer},
    )


def parameters(rng) -> dict:
    grouped = bool(rng.random() < 0.35)
    c = _config(rng, grouped=grouped)
    p = c.parameters()
    G, H, dh, d = c.kv_heads, c.n_heads, c.d_head, c.d_model
    kv = (
        f" and {G} K/V heads (grouped-query: K and V are {G}·{dh} = {G * dh} wide)"
        if G != H
        else ""
    )
    lines = [
        f"d_head = {d} / {H} = {dh}",
        f"W_Q: {d} × {H * dh} = {count(p['W_Q'])}",
        f"W_K: {d} × {G * dh} = {count(p['W_K'])}",
        f"W_V: {d} × {G * dh} = {count(p['W_V'])}",
        f"W_O: {H * dh} × {d} = {count(p['W_O'])}",
        f"total = {count(c.params_per_layer)}",
    ]
    return dict(
        prompt=f"How many parameters are in one attention layer (W_Q, W_K, W_V, W_O, no biases) "
        f"of a model with d_model = {d}, {H} query heads{kv}?",
        answer_type="number",
        answer=c.params_per_layer,
        rel=0.005,
        hint="Count the entries of the four weight matrices; W_Q and W_O are d_model × "
        "n_heads·d_head.",
        solution=tuple(lines),
        data={"d_model": d, "n_heads": H, "n_kv_heads": G},
    )


def kv_cache(rng) -> dict:
    grouped = bool(rng.random() < 0.5)
    layers = int(rng.choice((4, 6, 12, 24, 30, 32)))
    c = _config(rng, grouped=grouped, layers=layers)
    dtype = str(rng.choice(list(dims.BYTES)))
    per_token = c.to_dict()["kv_cache_bytes_per_token"][dtype]
    b, G, dh = dims.BYTES[dtype], c.kv_heads, c.d_head
    kv = f", {G} K/V heads" if G != c.n_heads else ""
    return dict(
        prompt=f"A decoder with {layers} layers, d_model = {c.d_model}, {c.n_heads} heads{kv} "
        f"keeps a KV cache in {dtype} ({b} bytes per number). How many bytes does the "
        f"cache grow by for each new token?",
        answer_type="number",
        answer=per_token,
        rel=0.005,
        hint="Per layer, each K/V head stores one k and one v of d_head numbers for the token.",
        solution=(
            f"d_head = {c.d_model} / {c.n_heads} = {dh}",
            f"2 (k and v) × {G} K/V heads × {dh} × {layers} layers = "
            f"{count(c.kv_cache_values_per_token())} numbers",
            f"× {b} bytes = {count(per_token)} bytes per token",
        ),
        data={
            "d_model": c.d_model,
            "n_heads": c.n_heads,
            "n_kv_heads": G,
            "layers": layers,
            "dtype": dtype,
        },
    )


KINDS = {
    "sizes/d_head": d_head,
    "sizes/sqrt_d_head": sqrt_d_head,
    "sizes/scores": scores_count,
    "sizes/parameters": parameters,
    "sizes/kv_cache": kv_cache,
}
