"""Built-in scenes: small sentences with hand-chosen X and projection matrices, each teaching one thing.

Single-head scenes keep W_Q, W_K, W_V as (d_model, d_k) matrices, exactly as the tutorials
draw them; multi-head scenes use the (n_heads, d_model, d_head) layout of ``MultiHeadAttention``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import numpy as np

from qkv import display, masks
from qkv.attention import attention
from qkv.multihead import MultiHeadAttention
from qkv.trace import Trace

DEFAULT = "cat-sat"


@dataclass(frozen=True)
class Scene:
    """One preset: tokens, their input vectors X, the projection weights, and its lesson."""

    name: str
    title: str
    lesson: str  # one line: what this scene teaches
    tokens: tuple[str, ...]
    x: np.ndarray  # (L, d_model)
    W_Q: np.ndarray  # (d_model, d_k) or (n_heads, d_model, d_head)
    W_K: np.ndarray
    W_V: np.ndarray
    select: int  # index of the token selected by default
    W_O: np.ndarray | None = None  # (n_heads, d_head, d_model) for multi-head scenes
    b_O: np.ndarray | None = None
    scaled: bool = True  # False for the unscaled worked example

    def __post_init__(self):
        if self.x.shape[0] != len(self.tokens):
            raise ValueError(
                f"scene {self.name!r}: X has {self.x.shape[0]} rows for {len(self.tokens)} tokens"
            )

    @property
    def n_heads(self) -> int | None:
        return self.W_Q.shape[0] if self.W_O is not None else None

    def index(self, token: str | int) -> int:
        """Position of a token given by text (first occurrence) or index."""
        if isinstance(token, (int, np.integer)) and not isinstance(token, bool):
            if not -len(self.tokens) <= token < len(self.tokens):
                raise ValueError(
                    f"token index must be in [0, {len(self.tokens)}) for scene "
                    f"{self.name!r}, got {token}"
                )
            return int(token) % len(self.tokens)
        if token in self.tokens:
            return self.tokens.index(token)
        raise ValueError(
            f"token {token!r} is not in scene {self.name!r}; choose one of "
            f"{list(self.tokens)} or an index 0-{len(self.tokens) - 1}"
        )

    def trace(
        self,
        *,
        temperature: float = 1.0,
        scaled: bool | None = None,
        causal=False,
        softcap: float | None = None,
        sink: float | None = None,
        alibi: float | None = None,
    ) -> Trace:
        """Run the scene through the engine and return the full trace (x, q, k, v, ... out).

        softcap (> 0): Gemma 2's soft-capping, step "capped"; sink: one sink logit for every
        head (GPT-OSS), step "sink"; alibi (a slope ≥ 0): the bias ``masks.alibi``, step
        "biased". None leaves the step out."""
        scaled = self.scaled if scaled is None else scaled
        L = len(self.tokens)
        extra = {
            "softcap": softcap,
            "bias": None if alibi is None else masks.alibi(L, L, alibi),  # (L, L)
            "sinks": None if sink is None else np.asarray(float(sink)),
        }
        if self.W_O is None:
            q, k, v = self.x @ self.W_Q, self.x @ self.W_K, self.x @ self.W_V  # (L, d)
            _, tr = attention(
                q,
                k,
                v,
                scale=None if scaled else 1.0,
                temperature=temperature,
                causal=causal,
                return_trace=True,
                **extra,
            )
            tr.steps = {"x": self.x, **tr.steps}
        else:
            if not scaled:
                raise ValueError(
                    f"scene {self.name!r} is multi-head; it always scales by 1/√d_head"
                )
            mha = MultiHeadAttention.from_weights(self.W_Q, self.W_K, self.W_V, self.W_O, self.b_O)
            _, tr = mha(self.x, temperature=temperature, causal=causal, return_trace=True, **extra)
        tr.tokens = list(self.tokens)
        return tr

    def _repr_html_(self) -> str:
        return display.static_html("scene", self)

    def to_html(self, path=None, **kwargs) -> str:
        """One self-contained HTML file of the simulator's panels for this scene (every token
        and head precomputed at the τ values given; see ``qkv.notebook.export.to_html``)."""
        return display.export_html(self, path, **kwargs)


def _from_table(name: str) -> Scene:
    """A single-head scene whose numbers are a table in ``scenes.json`` (its "features" name
    the columns of x and of the projections)."""
    t = _tables()[name]
    x, W_Q, W_K, W_V = (np.array(t[f], dtype=np.float64) for f in ("x", "W_Q", "W_K", "W_V"))
    tokens, select = tuple(t["tokens"]), t["select"]
    scaled = t.get("scaled", True)
    return Scene(name, t["title"], t["lesson"], tokens, x, W_Q, W_K, W_V, select, scaled=scaled)


@functools.cache
def _tables() -> dict:
    return json.loads(resources.files("qkv.explain").joinpath("scenes.json").read_text("utf-8"))


def _two_heads() -> Scene:
    # X features: [det, noun, verb, prep, animate, place, always-on, position/5]
    tokens = ("the", "cat", "sat", "on", "the", "mat")
    x = np.zeros((6, 8))
    for i, feats in enumerate([(0,), (1, 4), (2,), (3,), (0,), (1, 5)]):
        x[i, list(feats)] = 1.0
    x[:, 6] = 1.0
    x[:, 7] = np.arange(6) / 5
    W_Q = np.zeros((2, 8, 4))
    W_K = np.zeros((2, 8, 4))
    W_Q[0, 2, 0] = 3.0  # head 0 "who?": the verb asks for an animate subject
    W_Q[0, 6, 1] = 0.5  # ... everyone else mildly prefers nouns
    W_K[0, 4, 0] = 2.0
    W_K[0, 1, 1] = 1.0
    W_Q[1, 2, 0] = 3.0  # head 1 "where?": the verb and the preposition ask for a place
    W_Q[1, 3, 0] = 3.0
    W_Q[1, 6, 1] = 1.0  # ... everyone else looks at the previous words (earlier positions)
    W_K[1, 5, 0] = 2.0
    W_K[1, 7, 1] = -2.0
    W_V = np.zeros((2, 8, 4))
    W_V[0, 4, 0] = W_V[0, 1, 1] = 1.0  # head 0 returns "animate", "noun"
    W_V[1, 5, 0] = W_V[1, 3, 1] = 1.0  # head 1 returns "place", "preposition"
    W_V[:, 6, 3] = 0.1
    W_O = np.zeros((2, 4, 8))
    W_O[0, :, :4] = np.eye(4)  # head 0 writes into the first half of the residual stream
    W_O[1, :, 4:] = np.eye(4)  # head 1 into the second half
    lesson = (
        "Two heads read the same sentence differently: for 'sat', head 0 finds who (cat), "
        "head 1 finds where (mat); W_O adds their outputs back together."
    )
    title = "the cat sat on the mat, two heads"
    return Scene("two-heads", title, lesson, tokens, x, W_Q, W_K, W_V, 2, W_O, np.zeros(8))


_BUILDERS: dict[str, Callable[[], Scene]] = {
    "cat-sat": functools.partial(_from_table, "cat-sat"),
    "agreement": functools.partial(_from_table, "agreement"),
    "bank": functools.partial(_from_table, "bank"),
    "two-token": functools.partial(_from_table, "two-token"),
    "two-heads": _two_heads,
}


def names() -> list[str]:
    """Names of the built-in scenes, the default first."""
    return list(_BUILDERS)


def load(name: str = DEFAULT) -> Scene:
    """The scene called ``name`` (see ``names()``)."""
    try:
        return _BUILDERS[name]()
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {names()}") from None
