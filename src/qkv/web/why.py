"""The model mode's "why this token" answer.

    POST /api/model/attribute  {model, text, target?, baseline?, corrupted?} -> the panel of
                               qkv.views.why: every head's share of logit(target) −
                               logit(baseline) at the last position, split by key for every
                               head, and with ``corrupted`` every head's patching score

``qkv.hf.attribute`` (and ``qkv.hf.patching``) run on the pool's model with its LM head, built
once per model and shared with the what-if (``whatif.Extras``); no attribution math lives here.
The target defaults to the model's likeliest next token. A target or baseline that is not one
token, a corrupted prompt of another length, a model without a next-token head (MiniLM, an
encoder directory) or a server without transformers is a 422 saying why.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from qkv.views import why as views
from qkv.web import models
from qkv.web.errors import FieldError
from qkv.web.schemas import request_config
from qkv.web.whatif import NO_TOKEN, Extras

MAX_TOKEN_CHARS = 64  # a target or baseline is one token's text
KEEP = 8  # answers kept per server: reopening a sentence's panel does not rerun the model


class WhyRequest(models.ModelRequest):
    model_config = request_config(
        {
            "model": "smollm2-135m",
            "text": "When Mary and John went to the store, John gave a drink to",
            "target": "␣Mary",
            "baseline": "␣John",
        }
    )

    target: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_TOKEN_CHARS,
        description="the token explained, one token's text (␣ = a space); default: the "
        "model's likeliest next token",
    )
    baseline: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_TOKEN_CHARS,
        description="explain logit(target) − logit(baseline); default: logit(target) alone",
    )
    corrupted: str | None = Field(
        None,
        min_length=1,
        max_length=models.MAX_CHARS,
        description="a prompt of as many tokens that changes the answer: adds patching scores",
    )


class Prediction(BaseModel):
    token: str
    id: int
    label: str = Field(description="the token as the page shows it (␣ for a space)")
    p: float = Field(description="the model's probability of this next token")


class WhyResponse(BaseModel):
    model: str
    text: str
    corrupted: str | None
    prediction: Prediction = Field(description="the model's likeliest next token")
    panel: dict = Field(description="qkv.views.why.panel: grids, top heads, shares, splits")


def _field_of(error: ValueError, fields=("target", "baseline")) -> str:
    """The request field a qkv.hf error is about: its first word when that names one."""
    first = str(error).split(" ", 1)[0]
    return first if first in fields else "text"


def answer(extras: Extras, req) -> dict:
    """The API's answer (see ``WhyResponse``)."""
    why = extras.why_no_next_token(req.model, NO_TOKEN)
    if why is not None:
        raise FieldError("model", why)
    m, _ = models.encoded(extras.pool, req.model, req.text)
    if req.corrupted is not None:
        models.encoded(extras.pool, req.model, req.corrupted, field="corrupted")
    if req.target is not None and req.baseline is not None:
        if req.target.replace("␣", " ") == req.baseline.replace("␣", " "):
            raise FieldError("baseline", f"baseline must differ from target, got {req.target!r}")
    import torch

    from qkv import hf
    from qkv.hf.tokens import named, prompt_ids

    lm, tokenizer = extras.language_model(req.model)
    local = req.model in extras.pool.local
    with extras.run_locks[req.model], models.failures_named(req.model, local):
        ids = prompt_ids(req.text, tokenizer)
        with torch.no_grad():
            logits = lm(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0, -1]
        p = torch.softmax(logits.double(), -1)
        top = int(p.argmax())
        target = req.target if req.target is not None else top
        every = [(i, h) for i in range(m.n_layers) for h in range(m.n_heads)]
        try:
            a = hf.attribute(
                lm, ids, target, baseline=req.baseline, tokenizer=tokenizer, by_key=every
            )
        except ValueError as e:
            raise FieldError(_field_of(e), str(e)) from None
        patched = None
        if req.corrupted is not None:
            b = None if a.baseline is None else a.baseline.id
            try:
                patched = hf.patching(
                    lm,
                    ids,
                    prompt_ids(req.corrupted, tokenizer),
                    a.target.id,
                    baseline=b,
                    tokenizer=tokenizer,
                    residual=False,
                    patterns=False,
                )
            except ValueError as e:
                raise FieldError("corrupted", str(e)) from None
    best = named(tokenizer, top)
    return {
        "model": req.model,
        "text": req.text,
        "corrupted": req.corrupted,
        "prediction": {**views.token_named(best.to_dict()), "p": float(p[top])},
        "panel": views.panel(a, patched),
    }


def router(extras: Extras) -> APIRouter:
    """The attribution endpoint over ``extras``' models."""
    routes = APIRouter()
    kept: OrderedDict = OrderedDict()
    lock = threading.Lock()

    def model_attribute(req):
        """Which heads wrote the next token: direct logit attribution at the last position,
        every head split by key, and (with corrupted) activation patching of every head."""
        key = tuple(req.model_dump().values())
        with lock:
            if key in kept:
                kept.move_to_end(key)
                return JSONResponse(kept[key])
        result = answer(extras, req)
        with lock:
            kept[key] = result
            while len(kept) > KEEP:
                kept.popitem(last=False)
        return JSONResponse(result)

    models.post_model_route(
        routes,
        "/api/model/attribute",
        model_attribute,
        models.naming_pool(WhyRequest, extras.pool),
        response_model=WhyResponse,
        refused="a field is missing or malformed; the target or baseline is not one token; "
        "the corrupted prompt's length differs or it gives the same logit difference; the "
        "model predicts no next token (why)",
    )
    return routes
