"""The practice panel's API: the same exercises as ``qkv quiz``, checked on the server.

    GET  /api/practice/topics            topics and their exercise kinds
    GET  /api/practice?topic=&kind=&seed=  one exercise, without its answer
    POST /api/practice/check             {kind, seed, answer} → verdict and worked solution

Endpoints are sync ``def``: exercises are built by the engine in the server's thread pool.

A text that is not an answer of the expected form ("twelve" for a number) is a valid request:
it is answered 200 with ``valid: false`` and a message, so the learner can try again. Unknown
kinds, bad seeds, missing or extra fields are 422.

The server keeps nothing: an exercise is rebuilt from (kind, seed) to check an answer.
"""

from __future__ import annotations

import secrets
from typing import Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from qkv import practice
from qkv.practice.bank import MAX_SEED
from qkv.web.errors import FieldError
from qkv.web.schemas import MAX_NAME_CHARS, Index, request_config

router = APIRouter()

Topic = Literal["all", "sizes", "scores", "softmax", "masks", "concepts"]
MAX_ANSWER_CHARS = 200


class PracticeExercise(BaseModel):
    kind: str
    topic: str
    seed: int
    prompt: str
    answer_type: Literal["number", "choice", "keys", "vector", "order"]
    choices: list[str]
    answer_format: str = Field(description="what to type, in one line")
    hint: str


class CheckRequest(BaseModel):
    model_config = request_config({"kind": "sizes/d_head", "seed": 1, "answer": "64"})

    kind: str = Field(
        max_length=MAX_NAME_CHARS, description="an exercise kind (GET /api/practice/topics)"
    )
    seed: Index = Field(le=MAX_SEED)
    answer: str = Field(max_length=MAX_ANSWER_CHARS, description="as a learner types it")


class Verdict(BaseModel):
    kind: str
    seed: int
    valid: bool = Field(
        description="false when the text is not an answer of the expected form "
        "(see message); try again"
    )
    message: str | None = Field(description="what was expected, when valid is false")
    correct: bool
    given: str | None = Field(description="the answer as read")
    expected: str | None = Field(description="the right answer (only once answered)")
    gap: float | None = Field(description="|given − answer| for numeric answers")
    solution: list[str] = Field(description="the worked solution (only once answered)")


def _exercise(kind: str, seed: int, field: str = "kind") -> practice.Exercise:
    if kind not in practice.KINDS:
        raise FieldError(
            field, f"unknown exercise kind {kind!r}; choose one of {list(practice.KINDS)}"
        )
    return practice.build(kind, seed)


@router.get("/api/practice/topics")
def topics() -> dict[str, list[str]]:
    """Each topic with its exercise kinds."""
    return {t: practice.kinds(t) for t in practice.TOPICS}


@router.get(
    "/api/practice",
    response_model=PracticeExercise,
    responses={422: {"description": "unknown topic or kind, or a bad seed"}},
)
def exercise(
    topic: Topic = "all",
    kind: str | None = Query(None, max_length=MAX_NAME_CHARS, description="overrides topic"),
    seed: int | None = Query(None, ge=0, le=MAX_SEED, description="default: a fresh one"),
):
    """One exercise (the seed picks the kind within the topic, then its numbers)."""
    if seed is None:
        seed = secrets.randbelow(MAX_SEED + 1)
    if kind is not None:
        ex = _exercise(kind, seed)
        if topic != "all" and ex.topic != topic:
            raise FieldError(
                "kind", f"kind {kind!r} is not in topic {topic!r}; its topic is {ex.topic!r}"
            )
    else:
        ex = practice.pick(topic, seed)
    return ex.public()


@router.post(
    "/api/practice/check",
    response_model=Verdict,
    responses={422: {"description": "unknown kind, bad seed, missing or extra field"}},
)
def check(req: CheckRequest):
    """Judge an answer: the exercise is rebuilt from (kind, seed) and checked by the engine."""
    ex = _exercise(req.kind, req.seed)
    try:
        v = practice.check(ex, req.answer)
    except practice.AnswerError as e:  # a well-formed request whose text is not an answer
        return Verdict(
            kind=ex.kind,
            seed=ex.seed,
            valid=False,
            message=str(e),
            correct=False,
            given=None,
            expected=None,
            gap=None,
            solution=[],
        )
    return Verdict(
        kind=ex.kind,
        seed=ex.seed,
        valid=True,
        message=None,
        correct=v.correct,
        given=v.given,
        expected=v.expected,
        gap=v.gap,
        solution=list(ex.solution),
    )
