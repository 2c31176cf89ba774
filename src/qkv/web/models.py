"""The simulator's "real model" mode: a sentence through a pretrained model, one head inspected.

    GET  /api/models          the models, whether each is installed, their context (the
                              most tokens a text may have) and character bound
    POST /api/model/trace     {model, text, layer, head, select, grid} -> the layers × heads grid
                              of weights and one head's trace, numbers and walkthrough (a text
                              of at most PANEL_TOKENS: the panels print every number)

A text up to the model's context is traced by a job (``jobs.py``) and shown by the zoom views
(``zoomapi.py``).

Each bundled model is loaded once per server process, on first use (``ModelPool``); local
transformers directories are loaded when the server starts (``qkv serve --model DIR``) and are
offered under their directory's name. A request picks a model from that list only (422
otherwise): no path or hub id taken from a request is ever loaded. The last few runs are kept,
so clicking through the heads of one sentence does not rerun the model. No attention math lives
here: the model's forward pass fills ``qkv.Trace`` objects (qkv's engine), the prose
comes from ``qkv.explain.walkthrough``.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, create_model

from qkv import models
from qkv.views import grid as grids
from qkv.views import selection
from qkv.web.errors import FieldError, shown
from qkv.web.schemas import Index, Section, Selected, request_config

PANEL_TOKENS = 32  # the panels that print every number of one head (POST /api/model/trace)
MAX_CHARS = 400  # of such a sentence, checked before tokenizing
CHARS_PER_TOKEN = 8  # a text may have 8 characters a token of the model's context, checked first
TEXT_CHARS = 65_536  # and never more (8 × SmolLM2's 8,192 tokens)
KEEP_RUNS = 4  # texts whose traces (every layer, lazy) stay in memory …
KEEP_BYTES = 3 << 30  # … while they hold at most 3 GB together (SmolLM2: ≈ 0.7 GB at 2,048 tokens)

if TYPE_CHECKING:
    ModelName = str
else:  # a Literal of the names known here, built at run time
    ModelName = Literal[tuple(models.NAMES)]


class ModelRequest(BaseModel):
    """What every model endpoint's request holds: a text through one of the server's models
    (``naming_pool`` narrows ``model`` to the names a server offers)."""

    model: ModelName = Field(description="GET /api/models lists them")
    text: str = Field(min_length=1, max_length=MAX_CHARS)


class ModelTraceRequest(ModelRequest):
    """A sentence through a real model; which layer, head and query token to inspect."""

    model_config = request_config(
        {"model": "smollm2-135m", "text": "The cat sat on the mat", "layer": 3, "head": 2}
    )

    text: str = Field(
        min_length=1,
        max_length=MAX_CHARS,
        description=f"the sentence; at most {PANEL_TOKENS} tokens",
    )
    layer: Index = Field(0, description="layer to inspect, from 0")
    head: Index = Field(0, description="query head to inspect, from 0")
    select: Index | None = Field(None, description="query token index; default: the last token")
    grid: bool = Field(
        True, strict=True, description="include every layer's and head's weights (the grid)"
    )


class ModelInfo(BaseModel):
    name: str
    local: bool = Field(
        default=False,
        description="a transformers directory the server was started "
        "with (computed by qkv through qkv.hf)",
    )
    installed: bool | None = Field(None, description="its weights package is found here")
    n_layers: int | None = None
    n_heads: int | None = None
    n_kv_heads: int | None = None
    d_model: int | None = None
    d_head: int | None = None
    max_tokens: int | None = None  # the context: the most tokens a traced text may have
    max_chars: int = TEXT_CHARS  # characters a text may have, checked before tokenizing
    panel_tokens: int = PANEL_TOKENS  # the most tokens the panels that print every number show


class Grid(BaseModel):
    """Every layer's and head's weights, (n_layers, n_heads, R, K), one byte each: each head
    max-pooled to at most 64 × 64 (R = K = L for a text of at most 64 tokens), weight ≈ byte /
    255, row-major, base64. Enough to draw thumbnails, not to compute with."""

    shape: list[int]
    encoding: Literal["uint8/255 base64"] = grids.GRID_ENCODING
    data: str


class ModelTraceResponse(BaseModel):
    model: ModelInfo
    tokens: list[str]
    settings: dict = Field(description="model, layer, head, select actually used")
    grid: Grid | None
    trace: dict = Field(
        description="Trace.to_dict() of the selected head alone (no head axis): "
        "q, k, v (after RoPE where the model has it), scores … "
        "weights, z"
    )
    selected: Selected
    walkthrough: list[Section]


class ModelPool:
    """Models loaded on first use, once per process; finished runs kept for a few sentences."""

    def __init__(
        self, loader=models.load, *, loaded: dict | None = None, local: dict | None = None
    ):
        """local: name -> an already loaded ``qkv.hf.local.LocalModel``, offered besides the
        bundled models (names must differ from theirs)."""
        local = dict(local or {})
        if clash := set(local) & set(models.NAMES):
            raise ValueError(
                f"local model names must differ from the bundled "
                f"{models.names()}, got {sorted(clash)}"
            )
        self.loader = loader
        self.loaded = {**(loaded or {}), **local}
        self.local = set(local)
        self.names = models.names() + list(local)  # what a request may name, in list order
        self.missing: dict[str, str] = {}  # name -> why it cannot load
        self.runs: OrderedDict = OrderedDict()  # (name, text) -> ModelTrace
        self.pending: dict = {}  # (name, text) -> the lock of the request computing it
        self.lock = threading.Lock()
        self.load_locks = {name: threading.Lock() for name in self.names}
        # a transformers model traces through hooks on its modules: one run at a time
        self.run_locks = {name: threading.Lock() for name in self.local}

    def get(self, name: str):
        with self.load_locks[name]:
            if name not in self.loaded:
                try:
                    self.loaded[name] = self.loader(name)
                except models.ModelNotInstalled as e:  # the request names a model this
                    self.missing[name] = str(e)  # server cannot run: a 4xx, never a 5xx
                    raise FieldError(
                        "model", f"{name} is not installed on this server: {e}", status=422
                    ) from None
            return self.loaded[name]

    def run(self, model, text: str, progress=None):
        """The model's trace of ``text``: kept, or computed once even when several requests
        for it arrive together (the later ones wait for the first). ``progress(done, n)`` as
        each layer ends, for the bundled models."""
        key = (model.name, text)
        with self.lock:
            if key in self.runs:
                self.runs.move_to_end(key)
                return self.runs[key]
            pending = self.pending.setdefault(key, threading.Lock())
        with pending:
            with self.lock:
                if key in self.runs:  # computed while this request waited
                    self.runs.move_to_end(key)
                    return self.runs[key]
            try:
                with (
                    self.run_locks.get(model.name, contextlib.nullcontext()),
                    failures_named(model.name, model.name in self.local),
                ):
                    result = (
                        model.trace(text, progress=progress)
                        if progress is not None and model.name not in self.local
                        else model.trace(text)
                    )
                with self.lock:
                    self.runs[key] = result
                    while len(self.runs) > 1 and (
                        len(self.runs) > KEEP_RUNS
                        or sum(getattr(r, "nbytes", 0) for r in self.runs.values()) > KEEP_BYTES
                    ):
                        self.runs.popitem(last=False)
            finally:
                with self.lock:
                    self.pending.pop(key, None)
        return result

    def info(self, name: str) -> ModelInfo:
        m = self.loaded.get(name)
        if m is None:  # not loaded yet: installed when its weights package is found
            import importlib.util

            package = models.NAMES[name][1].replace("-", "_")
            found = name not in self.missing and importlib.util.find_spec(package) is not None
            return ModelInfo(
                name=name,
                installed=found,
                max_tokens=models.CONTEXT.get(name),
                max_chars=self.max_chars(name),
            )
        return ModelInfo(
            name=name,
            local=name in self.local,
            installed=True,
            n_layers=m.n_layers,
            n_heads=m.n_heads,
            n_kv_heads=m.n_kv_heads,
            d_model=m.d_model,
            d_head=m.d_head,
            max_tokens=m.max_tokens,
            max_chars=self.max_chars(name),
        )

    def max_chars(self, name: str) -> int:
        """Characters a text for ``name`` may have: CHARS_PER_TOKEN a token of its context
        (TEXT_CHARS for a model whose context is not known)."""
        context = getattr(self.loaded.get(name), "max_tokens", None) or models.CONTEXT.get(name)
        return min(TEXT_CHARS, CHARS_PER_TOKEN * context) if context else TEXT_CHARS


@contextlib.contextmanager
def failures_named(name: str, local: bool):
    """A local transformers model that fails on a text (its own code, not qkv's, e.g. a kernel
    its configuration does not suit) is answered with a 422 naming the model and the error
    (``qkv.hf.local.could_not_run``)."""
    if not local:
        yield
        return
    from qkv.hf.local import RUN_ERRORS, could_not_run  # a local model: transformers is here

    try:
        yield
    except FieldError:  # already names its field
        raise
    except ValueError as e:
        raise FieldError("model", str(e)) from None
    except RUN_ERRORS as e:
        raise FieldError("model", could_not_run(name, e)) from None


def in_range(field: str, value: int, n: int, what: str) -> None:
    if not 0 <= value < n:
        raise FieldError(field, f"{field} must be in [0, {n}) {what}, got {value}")


def grid(run) -> Grid:
    """Every layer's and head's weights max-pooled to at most 64 × 64, one byte each."""
    return Grid(**grids.grid_of({i: run.layers[i] for i in sorted(run.layers)}))


def encoded(pool: ModelPool, name: str, text: str, field: str = "text"):
    """(the loaded model, the token labels of ``text``); a text that is blank or longer than
    the page reads is a 422 naming ``field``."""
    if not text.strip():
        raise FieldError(
            field, f"{field} must contain at least one non-space character, got {shown(text)}"
        )
    m = pool.get(name)
    try:
        _, labels = m.encode(text, limit=PANEL_TOKENS)
    except ValueError as e:
        message = str(e).replace(
            "a trace keeps every step of every layer, so it reads", "the page reads"
        )
        raise FieldError(field, message.replace("text is", f"{field} is", 1)) from None
    return m, list(labels)


def checked(pool: ModelPool, req) -> tuple[object, list[str]]:
    """(the loaded model, the text's token labels) for a request naming a model, a text, a
    layer and a head; each out of range is a 422 naming its field."""
    m, labels = encoded(pool, req.model, req.text)
    in_range("layer", req.layer, m.n_layers, f"({req.model} has {m.n_layers} layers)")
    in_range("head", req.head, m.n_heads, f"({req.model} has {m.n_heads} heads a layer)")
    return m, list(labels)


def run(pool: ModelPool, req: ModelTraceRequest) -> dict:
    """The API's answer (see ``ModelTraceResponse``)."""
    m, _ = checked(pool, req)
    result = pool.run(m, req.text)
    L = len(result.tokens)
    i = L - 1 if req.select is None else req.select
    in_range("select", i, L, f"(the text is {L} tokens)")
    layer = result.layer(req.layer)
    head = selection.one_head(layer, req.head)
    return {
        "model": pool.info(req.model).model_dump(),
        "tokens": list(result.tokens),
        "settings": {"model": req.model, "layer": req.layer, "head": req.head, "select": i},
        "grid": grid(result).model_dump() if req.grid else None,
        **selection.answer(head, i, req.head, walk=layer),
    }


def pool_names(pool: ModelPool) -> Any:
    """The type of a name ``pool`` offers, Literal[...]: built at run time (none to check
    statically)."""
    return Literal[tuple(pool.names)]


def naming_pool(request: type[BaseModel], pool: ModelPool) -> type[BaseModel]:
    """``request`` with its ``model`` narrowed to the names ``pool`` offers: a request naming
    any other model is a 422 before any work."""
    return create_model(
        request.__name__,
        __base__=request,
        model=(pool_names(pool), Field(description="GET /api/models lists them")),
    )


def post_model_route(
    routes: APIRouter, path: str, handler, request: type[BaseModel], *, response_model, refused
) -> None:
    """POST ``path`` answered by ``handler(req)``, its body read as ``request`` (a class made at
    run time, so set on the handler rather than named in its signature); a 422 is ``refused``."""
    handler.__annotations__["req"] = request
    routes.post(path, response_model=response_model, responses={422: {"description": refused}})(
        handler
    )


def router(pool: ModelPool) -> APIRouter:
    """The model endpoints, answered from ``pool``."""
    routes = APIRouter()

    @routes.get("/api/models", response_model=list[ModelInfo])
    def list_models():
        """The real models, and whether each is installed (none is loaded to say so)."""
        return [pool.info(name) for name in pool.names]

    def model_trace(req):
        """Run the text through the model (cached per sentence); one head in detail."""
        # sync: the forward pass runs in the server's thread pool, not on the event loop
        return JSONResponse(run(pool, req))

    post_model_route(
        routes,
        "/api/model/trace",
        model_trace,
        naming_pool(ModelTraceRequest, pool),
        response_model=ModelTraceResponse,
        refused="a field is missing, malformed or out of range, the model is not one "
        "GET /api/models lists, or it is not installed",
    )
    return routes
