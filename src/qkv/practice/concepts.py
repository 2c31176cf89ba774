"""Concept exercises: multiple choice on what K and V are for, why three matrices, why ÷√d_k,
encoder vs decoder masking, what W_Q = W_K does; and putting the pipeline's steps in order.

Where a claim can be shown with numbers, the solution shows it with qkv's engine on fresh data.
"""

from __future__ import annotations

import numpy as np

from qkv import attention, steps
from qkv.explain.walkthrough import fmt
from qkv.practice.exercise import choice

# question, the right statement, three wrong ones, hint, explanation
QUESTIONS = {
    "key": (
        "In attention, what does a token's key vector k stand for?",
        "what the token offers to be matched against: a label that queries are compared with",
        (
            "the content the token passes on once it is attended to",
            "the token's position in the sentence",
            "the question the token asks of the other tokens",
        ),
        "Scores are q·k: the key is the half of the comparison that belongs to the token "
        "being looked at.",
        (
            "The query is what a token looks for; the key is how every token describes itself "
            "for that search.",
            "The value, not the key, is what gets mixed into the output.",
        ),
    ),
    "value": (
        "What is the value vector v used for?",
        "it is the content that is mixed into the output, weighted by the attention weights",
        (
            "it decides how strongly two tokens match",
            "it rescales the scores before the softmax",
            "it marks which keys the mask hides",
        ),
        "Look at the last step: z = Σ_j w_j·v_j.",
        (
            "The weights say how much of each token to take; the values say what is taken.",
            "Keys decide where a query looks, values decide what comes back.",
        ),
    ),
    "three": (
        "Why does attention project x with three different matrices W_Q, W_K, W_V "
        "instead of comparing and mixing the raw x vectors?",
        "so that what a token searches for, what it is matched on, and what it passes on "
        "can be learned separately",
        (
            "because three matrices make the computation faster than one",
            "because softmax needs exactly three inputs",
            "so that the output has three times as many dimensions",
        ),
        "With raw x, a token's match and its content would be the same vector.",
        (
            "With x·xᵀ as scores nothing is learned and every token matches itself best.",
            "Separate W_Q and W_K let 'looks for' differ from 'is found by' (the scores need "
            "not be symmetric); a separate W_V lets the passed-on content differ from both.",
        ),
    ),
    "scale": (
        "Why are the scores divided by √d_k before the softmax?",
        "q·k sums d_k products, so its spread grows like √d_k; unscaled, large scores "
        "saturate the softmax into near one-hot weights with vanishing gradients",
        (
            "to make the attention weights sum to 1",
            "to hide future tokens from the query",
            "because d_k is always 4, so √d_k = 2 is a convenient constant",
        ),
        "Think about the size of a sum of d_k random products.",
        (),
    ),
    "masking": (
        "Which kind of transformer uses a causal mask in its self-attention, and why?",
        "a decoder (GPT-style): while generating, a token must not see the tokens that "
        "come after it",
        (
            "an encoder (BERT-style): so each token sees only itself",
            "both always: attention cannot work without a mask",
            "neither: masks are only used for padding",
        ),
        "Which model produces text one token at a time?",
        (
            "An encoder reads the whole input at once and lets every token see every other "
            "(only padding is masked).",
            "A decoder is trained to predict the next token, so position i may use keys "
            "j ≤ i only; the hidden scores become −∞ and their weights exactly 0.",
        ),
    ),
    "symmetric": (
        "If W_Q = W_K, what happens to the score matrix q·kᵀ?",
        "it becomes symmetric: token a scores b exactly as b scores a",
        (
            "it becomes the identity matrix",
            "every score becomes 0",
            "nothing special: the scores are unrelated",
        ),
        "scores = (x·W_Q)(x·W_K)ᵀ = x·W_Q·W_Kᵀ·xᵀ.",
        (),
    ),
}

STEPS = (
    "scores = q·kᵀ",
    "scaled = scores ÷ √d_k",
    "tempered = scaled ÷ τ",
    "masked: hidden keys → −∞",
    "weights = softmax(masked)",
    "z = weights·v",
)


def _choice(rng, name: str, extra: tuple[str, ...] = (), data: dict | None = None) -> dict:
    question, right, wrong, hint, why = QUESTIONS[name]
    options = [right, *wrong]
    order = rng.permutation(len(options))
    choices = tuple(options[j] for j in order)
    return choice(
        question,
        int(np.flatnonzero(order == 0)[0]),
        choices,
        hint,
        (*why, *extra),
        data or {},
    )


def _plain(name: str):
    def make(rng) -> dict:
        return _choice(rng, name)

    make.__name__ = name
    return make


def scale(rng) -> dict:
    d_k = int(rng.choice((16, 64, 256, 1024, 4096)))
    q, k = rng.standard_normal((500, 1, d_k)), rng.standard_normal((500, 1, d_k))
    _, trace = attention(q, k, k, return_trace=True)  # 500 pairs: scores (500, 1, 1)
    raw, scaled = trace.steps["scores"].ravel(), trace.steps["scaled"].ravel()
    x = raw[:4]
    lines = (
        f"with random unit-variance q and k of d_k = {d_k}: the scores' standard deviation "
        f"is {fmt(raw.std(), 1)} (≈ √{d_k} = {fmt(np.sqrt(d_k), 1)}); after ÷ √d_k it is "
        f"{fmt(scaled.std(), 2)}",
        f"softmax of four unscaled scores {[round(float(s), 1) for s in x]} = "
        f"{[round(float(w), 3) for w in steps.softmax(x)]}",
        f"the same scores scaled: {[round(float(w), 3) for w in steps.softmax(x / np.sqrt(d_k))]}",
    )
    return _choice(rng, "scale", lines, {"d_k": d_k})


def symmetric(rng) -> dict:
    L, d = 4, 3
    x, W = rng.integers(-3, 4, size=(L, d)).astype(float), rng.integers(-2, 3, size=(d, d)) / 2
    q = steps.project(x, W)  # (L, d): W_Q = W_K = W, so k = q
    _, trace = attention(q, q, q, scale=1.0, return_trace=True)
    s = trace.steps["scores"]  # (L, L)
    if not np.allclose(s, s.T):
        raise AssertionError("scores with W_Q = W_K came out asymmetric")
    rows = [" ".join(f"{v:6.2f}" for v in row) for row in s]
    return _choice(
        rng,
        "symmetric",
        (
            "an example with the engine, scores for 4 tokens with W_Q = W_K:",
            *rows,
            "row a, column b equals row b, column a: the model can no longer make "
            "'a looks for b' differ from 'b looks for a'",
        ),
        {"L": L},
    )


def order(rng) -> dict:
    perm = rng.permutation(len(STEPS))
    choices = tuple(STEPS[j] for j in perm)
    answer = tuple(int(np.flatnonzero(perm == j)[0]) for j in range(len(STEPS)))
    return dict(
        prompt="Put the steps of attention for one query in order:",
        answer_type="order",
        answer=answer,
        choices=choices,
        hint="Scores come first and the weighted sum of values last; the mask acts just "
        "before softmax.",
        solution=(
            "x → q, k, v → " + " → ".join(s.split(" ")[0].rstrip(":") for s in STEPS),
            "scaling and temperature both divide scores; the mask comes last so that "
            "hidden keys stay at −∞, and softmax turns each row into weights",
        ),
        data={},
    )


KINDS = {
    "concepts/key": _plain("key"),
    "concepts/value": _plain("value"),
    "concepts/three": _plain("three"),
    "concepts/scale": scale,
    "concepts/masking": _plain("masking"),
    "concepts/symmetric": symmetric,
    "concepts/order": order,
}
