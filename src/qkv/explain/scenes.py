"""Built-in scenes: small sentences with hand-chosen X and projection matrices, each teaching one thing.

Single-head scenes keep W_Q, W_K, W_V as (d_model, d_k) matrices, exactly as the tutorials
draw them; multi-head scenes use the (n_heads, d_model, d_head) layout of ``MultiHeadAttention``.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def _a(rows) -> np.ndarray:
    return np.array(rows, dtype=np.float64)


def _cat_sat() -> Scene:
    return Scene(
        name="cat-sat",
        title="the cat sat on the mat",
        lesson="A query is compared with every key; keys decide where to look, values decide "
        "what comes back.",
        tokens=("the", "cat", "sat", "on", "the", "mat"),
        x=_a(
            [
                [1.0, 0.0, 0.2],
                [0.2, 1.0, 0.1],
                [0.9, 0.3, 1.0],
                [0.1, 0.1, 0.4],
                [1.0, 0.0, 0.2],
                [0.7, 0.5, 0.8],
            ]
        ),
        W_Q=_a([[0.8, 0.1, 0.3], [0.2, 0.9, 0.1], [0.6, 0.2, 1.0]]),
        W_K=_a([[0.7, 0.0, 0.4], [0.1, 1.0, 0.2], [0.5, 0.3, 0.9]]),
        W_V=_a([[1.0, 0.0, 0.5], [0.0, 1.0, 0.2], [0.3, 0.4, 1.0]]),
        select=2,
    )


def _agreement() -> Scene:
    # X features: [pronoun, 3rd-singular, verb, blank slot]
    tokens = ("I", "work", ",", "you", "work", ",", "he", "___")
    x = _a(
        [
            [1, 0, 0, 0],
            [0, 0, 1, 0],
            [0, 0, 0, 0],
            [1, 0, 0, 0],
            [0, 0, 1, 0],
            [0, 0, 0, 0],
            [1, 1, 0, 0],
            [0, 0, 0, 1],
        ]
    )
    x[2] = x[5] = [0.1, 0.0, 0.0, 0.0]  # commas: almost nothing
    return Scene(
        name="agreement",
        title="I work , you work , he ___",
        lesson="The blank's query looks for a 3rd-singular subject (matched on K), while 'he' "
        "delivers a different thing on V: the verb needs -s.",
        tokens=tokens,
        x=x,
        # q/k space: [wants/is 3rd-singular subject, wants/is any subject]
        W_Q=_a([[0.0, 0.5], [0.0, 0.0], [0.0, 0.5], [3.0, 1.0]]),
        W_K=_a([[0.0, 1.0], [2.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),
        # v space: [verb needs -s, stem is plain, is a subject]
        W_V=_a([[0.0, 0.0, 1.0], [1.0, -1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]),
        select=7,
    )


def _bank() -> Scene:
    # X features: [finance, river, verb-of-money, function word]
    tokens = ("I", "went", "to", "the", "bank", "to", "deposit", "money")
    x = _a(
        [
            [0.0, 0.0, 0.0, 1.0],
            [0.0, 0.2, 0.1, 0.3],
            [0.0, 0.0, 0.0, 1.0],
            [0.0, 0.0, 0.0, 1.0],
            [0.6, 0.6, 0.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [0.9, 0.0, 1.0, 0.0],
            [1.0, 0.0, 0.3, 0.0],
        ]
    )
    return Scene(
        name="bank",
        title="I went to the bank to deposit money",
        lesson="'bank' is ambiguous: its query asks 'what kind of place am I?', and the key of "
        "'deposit' (a financial act) answers best.",
        tokens=tokens,
        x=x,
        W_Q=_a([[2.0, 0.5], [2.0, 0.5], [0.0, 0.0], [0.0, 0.0]]),
        W_K=_a([[0.5, 0.0], [0.0, 0.3], [2.0, 0.0], [0.0, 0.0]]),
        W_V=_a([[1.0, 0.0], [0.0, 1.0], [0.5, 0.0], [0.0, 0.0]]),
        select=4,
    )


def _two_token() -> Scene:
    return Scene(
        name="two-token",
        title="the two-token worked example",
        lesson="With X = I, QKᵀ = [[0, 1], [1, 0]] and V = [[2, 0], [0, 3]], unscaled row 0 is "
        "0.27·(2, 0) + 0.73·(0, 3) = (0.54, 2.19).",
        tokens=("subject", "verb"),
        x=np.eye(2),
        W_Q=np.eye(2),
        W_K=_a([[0, 1], [1, 0]]),
        W_V=_a([[2, 0], [0, 3]]),
        select=0,
        scaled=False,
    )


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
    return Scene(
        name="two-heads",
        title="the cat sat on the mat, two heads",
        lesson="Two heads read the same sentence differently: for 'sat', head 0 finds who "
        "(cat), head 1 finds where (mat); W_O adds their outputs back together.",
        tokens=tokens,
        x=x,
        W_Q=W_Q,
        W_K=W_K,
        W_V=W_V,
        W_O=W_O,
        b_O=np.zeros(8),
        select=2,
    )


_BUILDERS = {
    "cat-sat": _cat_sat,
    "agreement": _agreement,
    "bank": _bank,
    "two-token": _two_token,
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
