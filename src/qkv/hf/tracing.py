"""Record one ``qkv.Trace`` per attention layer of a transformers model while it runs.

    >>> with qkv.hf.trace(model, tokenizer=tok) as run:
    ...     model(**inputs)
    >>> run.layer(3)["weights"].shape        # (n_heads, L, L): sequence 0, padding dropped

``run`` is a ``qkv.models.ModelTrace`` (what the bundled models give, so ``qkv explain`` and the
page show it) for the first sequence of the first forward call; ``run.batch`` holds one per
sequence, ``run.calls`` every forward call's batched traces (``generate`` makes one call per new
token), ``run.names`` each layer's module name.

The model runs its fast kernels while it is traced: each layer's trace is a
``qkv.lazy.LazyTrace`` that keeps x, q, k, v, out and the mask as a rule (padding, causal, a
sliding window: ``masks.infer``) and computes the other steps when they are read. A sequence's
trace in ``run.batch`` is a view of its call's arrays (padding cut off), never a copy. Layers
whose steps were computed anyway (edits, ``output_attentions``, dropout) keep them as they are.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from qkv import masks
from qkv.hf import session as sessions
from qkv.hf.tokens import texts
from qkv.lazy import LazyTrace
from qkv.models.result import ModelTrace
from qkv.tiles import Source
from qkv.trace import Trace, to_numpy

# Steps whose axis -1 runs over keys (cut with the keys when padding is dropped).
_KEY_AXIS = ("scores", "scaled", "tempered", "capped", "biased", "masked", "weights")


@dataclass
class HFRun(ModelTrace):
    """A ``ModelTrace`` of sequence 0 plus every sequence and every forward call."""

    names: list[str] = field(default_factory=list)
    batch: list[ModelTrace] = field(default_factory=list)
    calls: list[dict[int, Trace]] = field(default_factory=list)


def _first_input(args, kwargs, name, position=0):
    if name in kwargs:
        return kwargs[name]
    return args[position] if len(args) > position else None


def sequence(trace: Trace, b: int, keep: np.ndarray, tokens: list[str], total: int) -> Trace:
    """Sequence ``b`` of a batched layer trace with only positions ``keep`` (padding dropped)
    on the query axis and, for self-attention over the ``total`` input positions, the key axis;
    other layers (cross-attention, a decoder's own positions) keep every position."""
    L, S = trace.settings["L"], trace.settings["S"]
    same = L == S == total
    if isinstance(trace, LazyTrace):
        labels = list(tokens) if same else None
        return trace.sequence(b, keep if same else None, tokens=labels, key_tokens=labels)
    steps = {}
    for name, a in trace.steps.items():
        a = np.asarray(a)[b]
        if same:  # every step's axis -2 runs over positions; key steps' axis -1 too
            a = np.take(a, keep, axis=-2)
            if name in _KEY_AXIS:
                a = np.take(a, keep, axis=-1)
        steps[name] = a
    n = len(keep) if same else L
    settings = dict(trace.settings, L=n, S=len(keep) if same else S)
    mask = settings.get("mask")
    if mask is not None:
        mask = np.broadcast_to(mask, trace.steps["weights"].shape)[b, 0]  # (L, S)
        if same:
            mask = mask[np.ix_(keep, keep)]
        settings["mask"] = np.ascontiguousarray(mask)
    labels = list(tokens) if same else None
    return Trace(steps, settings, tokens=labels, key_tokens=labels)


class Recorder:
    """Collects layer traces per forward call, and the inputs of each call."""

    def __init__(self, model, layers):
        self.model = model
        self.keep = None if layers is None else set(layers)
        self.calls: list[dict[int, Trace]] = []
        self.inputs: list[tuple] = []  # (input_ids, attention_mask) per call
        self.x: dict[int, object] = {}
        self.rules: dict[tuple, tuple] = {}  # a mask's memory -> (mask, its rule), this call

    def start_call(self, module, args, kwargs):
        self.calls.append({})
        self.inputs.append((_first_input(args, kwargs, "input_ids"), kwargs.get("attention_mask")))
        self.rules = {}

    def record(self, index, p):
        """Keep a layer that ran the fast kernels as a lazy trace of its checked problem."""
        if self.keep is not None and index not in self.keep:
            return
        stored = {"x": to_numpy(self.x.pop(index))} if index in self.x else {}
        self._store(index, LazyTrace(Source.of(p, rule=self.rule(p)), stored=stored))

    def rule(self, p) -> masks.Rule:
        """The mask of problem ``p`` as a rule, worked out once per mask transformers built."""
        L, S = p.q.shape[-2], p.k.shape[-2]
        if p.mask is None:
            return masks.Rule(L, S, causal=p.causal)
        dense = to_numpy(p.mask)
        key = (dense.__array_interface__["data"][0], dense.shape, dense.strides, p.causal)
        if key not in self.rules:  # layers of one kind share the mask transformers built
            rule = masks.infer(dense, L, S)
            if p.causal is not None:  # the adapter passes causal only without a mask
                rule = masks.Rule(L, S, mask=dense, causal=p.causal)
            self.rules[key] = (p.mask, rule)  # the mask held, so its memory is not reused
        return self.rules[key][1]

    def _store(self, index, trace):
        if not self.calls:
            self.calls.append({})
            self.inputs.append((None, None))
        self.calls[-1][index] = trace

    def __call__(self, index, module, kept, settings):
        if self.keep is not None and index not in self.keep:
            return
        steps = {name: to_numpy(a) for name, a in kept.items()}
        if index in self.x:
            steps["x"] = to_numpy(self.x.pop(index))
        settings = dict(settings)
        if settings.get("mask") is not None:
            settings["mask"] = to_numpy(settings["mask"])
        self._store(index, Trace(steps, settings))

    def layer_hooks(self, index):
        def before(module, args, kwargs):
            x = _first_input(args, kwargs, "hidden_states")
            if x is not None:
                self.x[index] = x

        def after(module, args, kwargs, output):
            out = output[0] if isinstance(output, tuple) else output
            trace = self.calls[-1].get(index) if self.calls else None
            if trace is not None and out is not None and "out" not in trace.steps:
                if isinstance(trace, LazyTrace):
                    trace.stored["out"] = to_numpy(out)
                else:
                    trace.steps = {**trace.steps, "out": to_numpy(out)}

        return before, after


def _finish(run: HFRun, rec: Recorder, tokenizer) -> None:
    run.calls = rec.calls
    if not rec.calls:
        return
    ids, mask = rec.inputs[0]
    traces = rec.calls[0]
    if ids is None:
        run.layers = {i: t for i, t in traces.items()}
        return
    ids = to_numpy(ids)
    mask = np.ones_like(ids) if mask is None else to_numpy(mask)
    for b in range(ids.shape[0]):
        keep = np.flatnonzero(mask[b] != 0)
        row = [int(t) for t in ids[b, keep]]
        labels = texts(tokenizer, row)
        layers = {i: sequence(t, b, keep, labels, ids.shape[1]) for i, t in traces.items()}
        run.batch.append(ModelTrace(run.model, labels, row, layers, None))
    first = run.batch[0]
    run.tokens, run.ids, run.layers = first.tokens, first.ids, first.layers


@contextlib.contextmanager
def trace(model, *, tokenizer=None, layers=None):
    """Record every attention layer of ``model`` (only ``layers`` when given: indices into
    ``qkv.hf.attention_layers(model)``) while the ``with`` block runs it; yields an ``HFRun``
    that fills in when the block ends. The model must use ``attn_implementation="qkv"``."""
    sessions.check_uses_qkv(model)
    name = getattr(model.config, "name_or_path", "") or model.config.model_type
    session = sessions.joined(model)
    rec = Recorder(model, layers)
    session.recorder = rec
    run = HFRun(
        model=name, tokens=[], ids=[], layers={}, hidden=None, names=[n for n, _ in session.layers]
    )
    handles = [model.register_forward_pre_hook(rec.start_call, with_kwargs=True)]
    for index, (_, module) in enumerate(session.layers):
        before, after = rec.layer_hooks(index)
        handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(module.register_forward_hook(after, with_kwargs=True))
    try:
        with session.active():
            yield run
    finally:
        for h in handles:
            h.remove()
    _finish(run, rec, tokenizer)
