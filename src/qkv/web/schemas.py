"""The simulator API's request and response shapes, validated with pydantic.

Every array travels as nested JSON lists. Weights always carry a head axis, so single-head and
multi-head scenes share one shape vocabulary (docs/architecture.md):

    x (L, d_model)   W_Q, W_K (n_heads, d_model, d_head)   W_V (n_heads, d_model, d_v)
    W_O (n_heads, d_v, d_model), only for multi-head scenes   b_O (d_model,)

A single-head scene is n_heads = 1 without W_O.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_SCENE_TOKENS = 64  # L: rows of X
MAX_DIMS = 64  # d_model, d_head, d_v
MAX_HEADS = 8
MAX_ABS = 1000.0  # |every X and W entry|: keeps every score finite in float64
TAU_MIN, TAU_MAX = 0.001, 1000.0  # τ: the page's slider spans 0.05–10
MAX_TOKEN_CHARS = 32
MAX_NAME_CHARS = 64  # preset and exercise-kind names
# The largest scene request: x (64, 64), W_Q, W_K, W_V, W_O (8, 64, 64), b_O (64,), 135,232
# numbers, each at most 26 bytes as JSON ("-2.2250738585072014e-308, ") = 3.5 MB with tokens
# and brackets. Bodies past this are refused (413) before they are parsed.
MAX_BODY_BYTES = 4 * 1024 * 1024

# A number: a JSON int or float (not a string, not a bool), finite, |value| ≤ MAX_ABS.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-MAX_ABS, le=MAX_ABS)]
# τ: a Number in [TAU_MIN, TAU_MAX].
Tau = Annotated[Number, Field(ge=TAU_MIN, le=TAU_MAX)]
# An index or a count from 0: a JSON integer (not a string, not a bool), ≥ 0.
Index = Annotated[int, Field(strict=True, ge=0)]
Row = Annotated[list[Number], Field(min_length=1, max_length=MAX_DIMS)]
Matrix = Annotated[list[Row], Field(min_length=1, max_length=MAX_DIMS)]
Matrix_X = Annotated[list[Row], Field(min_length=1, max_length=MAX_SCENE_TOKENS)]
Heads = Annotated[list[Matrix], Field(min_length=1, max_length=MAX_HEADS)]
Token = Annotated[str, Field(min_length=1, max_length=MAX_TOKEN_CHARS)]
Alignment = Literal["bottom-right", "top-left"]


def request_config(example: dict) -> ConfigDict:
    """Every request's config: unknown keys refused, ``example`` shown in the API's docs."""
    return ConfigDict(extra="forbid", json_schema_extra={"examples": [example]})


class TraceRequest(BaseModel):
    """One computation: a preset, optionally with its tokens, X or weights replaced."""

    model_config = request_config(
        {"preset": "cat-sat", "select": 2, "temperature": 0.5, "causal": True}
    )

    preset: str = Field(
        "cat-sat",
        max_length=MAX_NAME_CHARS,
        description="built-in scene to start from (GET /api/presets)",
    )
    tokens: Annotated[list[Token], Field(min_length=1, max_length=MAX_SCENE_TOKENS)] | None = Field(
        None, description="token labels, one per row of x; default: the preset's"
    )
    x: Matrix_X | None = Field(None, description="input vectors X (L, d_model)")
    W_Q: Heads | None = Field(None, description="(n_heads, d_model, d_head)")
    W_K: Heads | None = Field(None, description="(n_heads, d_model, d_head)")
    W_V: Heads | None = Field(None, description="(n_heads, d_model, d_v)")
    W_O: Heads | None = Field(None, description="(n_heads, d_v, d_model); multi-head scenes only")
    b_O: Row | None = Field(None, description="(d_model,); multi-head scenes only")
    select: Annotated[Index, Field(lt=MAX_SCENE_TOKENS)] | None = Field(
        None, description="query token index; default: the preset's"
    )
    temperature: Tau = Field(1.0, description="τ divides the scaled scores")
    scaled: bool | None = Field(
        None, strict=True, description="divide scores by √d_k; default: the preset's"
    )
    causal: bool = Field(False, strict=True, description="hide keys after the query")
    align: Alignment = Field("bottom-right", description="causal alignment")
    head: Annotated[Index, Field(lt=MAX_HEADS)] | None = Field(
        None, description="head to explain in multi-head scenes (default 0)"
    )
    softcap: Annotated[Number, Field(ge=TAU_MIN)] | None = Field(
        None,
        description="soft-cap: capped = cap·tanh(tempered / cap), as "
        "Gemma 2 (step 'capped'); default: none",
    )
    sink: Number | None = Field(
        None,
        description="a sink logit in every row's softmax, as GPT-OSS (step 'sink'); default: none",
    )
    alibi: Annotated[Number, Field(ge=0)] | None = Field(
        None,
        description="ALiBi slope: the bias −slope·|i − j| is added to the "
        "scores (step 'biased'); default: none",
    )


class SceneInfo(BaseModel):
    """A preset's description (GET /api/presets)."""

    name: str
    title: str
    lesson: str
    tokens: list[str]
    select: int
    scaled: bool
    n_heads: int | None = Field(description="None for single-head scenes")
    d_model: int


class SceneData(SceneInfo):
    """A preset with its numbers (GET /api/presets/{name}), in the request's shapes."""

    x: list[list[float]]
    W_Q: list[list[list[float]]]
    W_K: list[list[list[float]]]
    W_V: list[list[list[float]]]
    W_O: list[list[list[float]]] | None
    b_O: list[float] | None


class Section(BaseModel):
    title: str
    lines: list[str]


class Selected(BaseModel):
    """Numbers about the selected query row (of the selected head), computed by the engine."""

    index: int
    head: int | None
    weights_sum: float
    entropy: float = Field(description="nats")
    effective_tokens: float = Field(description="exp(entropy)")
    visible_keys: int
    contributions: list[list[float]] = Field(description="w_j·v_j, (S, d_v); sums to z")
    sink: float | None = Field(None, description="the weight the sink takes (traces with sinks)")
    sum_with_sink: float | None = Field(None, description="weights_sum + sink: 1 (with sinks)")


class TraceResponse(BaseModel):
    scene: SceneInfo
    settings: dict = Field(description="the request's effective settings")
    trace: dict = Field(
        description="Trace.to_dict(): arrays as {dtype, shape, data}, "
        "non-finite numbers as the strings '-inf', 'inf', 'nan'"
    )
    selected: Selected
    walkthrough: list[Section]
