"""The model mode's "what if" and head-taxonomy answers.

    GET  /api/model/abilities  per model: can it answer a what-if, a taxonomy (and why not)
    POST /api/model/patch      {model, text, layer, head, edit, top_k} -> the next token's top-k
                               before and after one edit of one head, KL(before ‖ after)
    GET  /api/model/taxonomy   ?model=NAME -> previous / first / duplicate / induction score of
                               every layer and head, measured once per model and process

Both run through ``qkv.hf`` (the ``hf`` extra, transformers): ``qkv.hf.compare`` runs the model
with and without the edit, ``qkv.hf.taxonomy.measure`` scores the heads; no intervention or
scoring math lives here. Without transformers, or for a model that predicts no next token
(MiniLM, an encoder directory), the answer is a 422 saying why, and /api/model/abilities says
it beforehand so the page can disable its controls with the reason.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from qkv.explain.head_kinds import KINDS, MEANINGS
from qkv.web import models
from qkv.web.errors import FieldError
from qkv.web.schemas import Index, Tau, request_config

MAX_TOP_K = 20
ENCODERS = {"minilm-l6"}  # bundled models without a next-token head
NO_TOKEN = "so there is no next token to explain"  # why an attribution cannot be answered


class Edit(BaseModel):
    """Exactly one change to the selected head's attention steps."""

    model_config = ConfigDict(extra="forbid")

    ablate: Literal["zero"] | None = Field(None, description="the head's z set to 0")
    pin: Literal["uniform"] | None = Field(
        None, description="the head's weights set to uniform over the keys it may see"
    )
    tau: Tau | None = Field(None, description="the head's temperature τ (the model's is 1)")
    knockout: Index | None = Field(None, description="a key position the head may no longer see")

    @model_validator(mode="after")
    def one(self):
        given = [k for k in ("ablate", "pin", "tau", "knockout") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of ablate, pin, tau, knockout; got {given or 'none'}"
            )
        return self


class PatchRequest(models.ModelRequest):
    model_config = request_config(
        {
            "model": "smollm2-135m",
            "text": "The capital of France is",
            "layer": 3,
            "head": 4,
            "edit": {"ablate": "zero"},
        }
    )

    layer: Index
    head: Index
    edit: Edit
    top_k: int = Field(5, strict=True, ge=1, le=MAX_TOP_K)


class Candidate(BaseModel):
    token: str
    p: float = Field(description="probability of this next token")


class PatchResponse(BaseModel):
    model: str
    tokens: list[str] = Field(description="the text's tokens; the prediction follows the last")
    edit: str = Field(description="the edit in words")
    before: list[Candidate]
    after: list[Candidate]
    kl: float = Field(description="KL(before ‖ after) in nats over the whole vocabulary")
    same_top: bool
    summary: str = Field(description="what changed, in one sentence")


class Ability(BaseModel):
    name: str
    what_if: bool
    what_if_why: str | None = Field(None, description="why not, when what_if is false")
    taxonomy: bool
    taxonomy_why: str | None = None
    attribute: bool = Field(False, description="POST /api/model/attribute can answer")
    attribute_why: str | None = None


class Taxonomy(BaseModel):
    model: str
    kinds: list[dict] = Field(description="[{name, meaning}] in the order of KINDS")
    scores: dict[str, list[list[float]]] = Field(description="kind -> (n_layers, n_heads)")
    half: int = Field(description="tokens before the repeat")
    sequences: int


def _missing_hf() -> str | None:
    try:
        import qkv.hf  # noqa: F401  (torch and transformers)
    except ImportError as e:
        return f"this needs transformers on the server: {e}"
    return None


class Extras:
    """A pool's language-model heads and taxonomies, each built once, on first use."""

    def __init__(self, pool: models.ModelPool):
        self.pool = pool
        self.lms: dict = {}
        self.taxonomies: dict = {}
        self.locks = {name: threading.Lock() for name in pool.names}
        self.run_locks = {name: threading.Lock() for name in pool.names}

    def why_no_what_if(self, name: str) -> str | None:
        return self.why_no_next_token(name, "so there is nothing to compare")

    def why_no_next_token(self, name: str, so: str) -> str | None:
        """Why ``name`` cannot predict a next token here (``so``: what that rules out), or
        None when it can."""
        if name in ENCODERS:
            return f"{name} is an encoder: it predicts no next token, {so}"
        if (why := _missing_hf()) is not None:
            return why
        if name in self.pool.local:
            m = self.pool.loaded[name]  # a local model is loaded when the pool is built
            if not m.predicts_next_token():
                archs = m.config.architectures
                return f"{name} has no next-token head (its architectures: {archs})"
        return None

    def language_model(self, name: str):
        """(transformers model computed by qkv with its LM head, tokenizer) for ``name``."""
        with self.locks[name]:
            if name not in self.lms:
                m = self.pool.get(name)
                if name in self.pool.local:
                    self.lms[name] = (m.causal_lm(), m.tokenizer)
                else:
                    from qkv.hf import bundled, loading

                    self.lms[name] = (bundled.from_own(m), loading.BundledTokenizer(m))
            return self.lms[name]

    def taxonomy(self, name: str):
        with self.locks[name]:
            if name not in self.taxonomies:
                from qkv.hf import taxonomy

                m = self.pool.get(name)
                with self.pool.run_locks.get(name, contextlib.nullcontext()):  # shared hooks
                    self.taxonomies[name] = taxonomy.measure(m)
            return self.taxonomies[name]


def patch(extras: Extras, req) -> dict:
    """The API's answer to one what-if (see ``PatchResponse``)."""
    if (why := extras.why_no_what_if(req.model)) is not None:
        raise FieldError("model", why)
    _, labels = models.checked(extras.pool, req)
    edit = req.edit.model_dump(exclude_none=True)
    if "knockout" in edit:
        models.in_range(
            "edit.knockout", edit["knockout"], len(labels), f"(the text is {len(labels)} tokens)"
        )
    from qkv.hf import compare

    local = req.model in extras.pool.local
    with models.failures_named(req.model, local):  # its directory may have changed since
        lm, tokenizer = extras.language_model(req.model)
    inputs = tokenizer(req.text, return_tensors="pt")
    inputs = {k: inputs[k] for k in ("input_ids", "attention_mask") if k in inputs}
    with extras.run_locks[req.model], models.failures_named(req.model, local):
        result = compare(
            lm, inputs, {f"{req.layer}.{req.head}": edit}, tokenizer=tokenizer, top_k=req.top_k
        )
    before = [{"token": t, "p": p} for t, p in result.before]
    after = [{"token": t, "p": p} for t, p in result.after]
    same = before[0]["token"] == after[0]["token"]
    return {
        "model": req.model,
        "tokens": labels,
        "edit": "; ".join(result.edits),
        "before": before,
        "after": after,
        "kl": result.kl,
        "same_top": same,
        "summary": summary(before, after, result.kl),
    }


def summary(before: list[dict], after: list[dict], kl: float) -> str:
    """One sentence on the likeliest next token and the KL, from numbers already computed."""
    b, a = before[0], after[0]
    if b["token"] == a["token"]:
        top = f"the likeliest next token stays {b['token']!r} ({b['p']:.3f} → {a['p']:.3f})"
    else:
        top = (
            f"the likeliest next token changes from {b['token']!r} ({b['p']:.3f}) to "
            f"{a['token']!r} ({a['p']:.3f})"
        )
    return f"{top}; KL(before ‖ after) = {kl:.4f} nats"


def router(pool: models.ModelPool, extras: Extras | None = None) -> APIRouter:
    """The what-if and taxonomy endpoints over ``pool``'s models (``extras``: its language
    models, shared with other routers; default: built here)."""
    extras = extras or Extras(pool)
    routes = APIRouter()

    @routes.get("/api/model/abilities", response_model=list[Ability])
    def abilities():
        """Per model: whether a what-if and a taxonomy can be answered, and why not."""
        missing = _missing_hf()
        return [
            Ability(
                name=n,
                what_if=(why := extras.why_no_what_if(n)) is None,
                what_if_why=why,
                taxonomy=missing is None,
                taxonomy_why=missing,
                attribute=(cannot := extras.why_no_next_token(n, NO_TOKEN)) is None,
                attribute_why=cannot,
            )
            for n in pool.names
        ]

    def model_patch(req):
        """Run the text with and without one edit of one head; the next token's top-k."""
        return JSONResponse(patch(extras, req))

    models.post_model_route(
        routes,
        "/api/model/patch",
        model_patch,
        models.naming_pool(PatchRequest, pool),
        response_model=PatchResponse,
        refused="a field is missing, malformed or out of range, "
        "or the model cannot answer a what-if (why)",
    )

    def model_taxonomy(model=Query(description="GET /api/models lists them")):
        """Score every head as previous-token, first-token, duplicate-token and induction head
        on repeated random tokens (qkv.hf.taxonomy); measured once per model."""
        if (why := _missing_hf()) is not None:
            raise FieldError("model", why)
        s = extras.taxonomy(model)
        return JSONResponse(
            {
                "model": model,
                "half": s.half,
                "sequences": s.sequences,
                "kinds": [{"name": k, "meaning": MEANINGS[k]} for k in KINDS],
                "scores": {k: getattr(s, k).tolist() for k in KINDS},
            }
        )

    # a type made here, not a name to look up
    model_taxonomy.__annotations__["model"] = models.pool_names(pool)
    routes.get(
        "/api/model/taxonomy",
        response_model=Taxonomy,
        responses={422: {"description": "unknown model, or transformers missing"}},
    )(model_taxonomy)
    return routes
