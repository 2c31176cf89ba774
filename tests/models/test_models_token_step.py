"""A generated token through SmolLM2's blocks in compiled code (models/token_step.py) against
the model's NumPy path, float64 and qkv's engine."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from qkv import attention  # noqa: E402
from qkv.cache import KVCache  # noqa: E402
from qkv.kernels import compiled, decode, decode_blas  # noqa: E402
from qkv.models import rope, token_step, token_step_jit  # noqa: E402

PROMPT = "The capital of France is"


def _prefilled(model, ids, room: int = 4):
    """One KVCache per layer holding the prompt's keys and values (the NumPy path), with room
    for ``room`` more positions before it grows."""
    caches = [KVCache(capacity=len(ids) + room) for _ in range(model.n_layers)]
    model._forward(np.asarray([ids]), None, keep=set(), caches=caches)
    return caches


def _compiled_step(model, x, caches, start):
    """token_step.step for the token whose embedding x is, at position ``start``."""
    cos, sin = rope.cos_sin([start], model.d_head, base=model.rope_base, dtype=np.float32)
    return token_step.step(model.blocks, x, caches, cos[0], sin[0], eps=model.eps)


def _numpy_step(model, token, caches, start, monkeypatch):
    """The hidden state (d_model,) after one token by the model's NumPy path."""
    with monkeypatch.context() as m:
        m.setattr(token_step, "step", lambda *args, **kwargs: None)
        hidden, _ = model._forward(np.asarray([[token]]), None, keep=set(), caches=caches,
                                   start=start)  # fmt: skip
    return hidden[0, 0]


@pytest.mark.parametrize("long", [False, True], ids=["short", "long-growing"])
def test_a_token_step_equals_the_numpy_path_and_float64(smollm2, smollm2_64, monkeypatch, long):
    """long: a prompt of more than one block of the loop's keys (256), in caches without room
    for the new token (the append grows them: the step reads the new buffers)."""
    ids, _ = smollm2.encode(PROMPT)
    room = 4
    if long:
        ids, room = (ids * 60)[:300], 0
    token, start = 5, len(ids)
    ours, theirs = _prefilled(smollm2, ids, room), _prefilled(smollm2, ids, room)
    x = smollm2.E_token[token].copy()
    row = _compiled_step(smollm2, x, ours, start)
    assert row is x  # it applied, and updated the embedding's copy in place
    want = _numpy_step(smollm2, token, theirs, start, monkeypatch)
    from qkv.layers import rms_norm

    got = rms_norm(row, smollm2.final_norm, eps=smollm2.eps)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)  # |got| up to about 14
    for a, b in zip(ours, theirs, strict=True):  # the same keys and values appended
        assert a.length == b.length == start + 1
        np.testing.assert_allclose(a.k, b.k, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a.v, b.v, rtol=1e-5, atol=1e-5)
    exact = _numpy_step(smollm2_64, token, _prefilled(smollm2_64, ids, room), start, monkeypatch)
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=2e-4)  # the codes: the same weights
    assert np.abs(got - exact).max() < np.abs(want - exact).max() * 2 + 1e-4  # no worse than NumPy


def test_generation_takes_the_compiled_step_and_gives_the_numpy_paths_tokens(smollm2, monkeypatch):
    calls = []
    real = token_step.step

    def counted(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(token_step, "step", counted)
    fast = [g.id for g in smollm2.generate(PROMPT, 6)]
    assert calls == [True] * 5  # every token after the prompt's
    monkeypatch.setattr(token_step, "step", lambda *args, **kwargs: None)
    assert [g.id for g in smollm2.generate(PROMPT, 6)] == fast


def test_a_replaced_matrix_is_multiplied_as_it_now_is(smollm2, monkeypatch):
    """A matrix replaced since loading has no codes: the step does not apply (the caches are
    left as they were) and the NumPy path multiplies the new matrix."""
    ids, _ = smollm2.encode(PROMPT)
    start, token = len(ids), 7
    before = smollm2._forward(np.asarray([[token]]), None, keep=set(),
                              caches=_prefilled(smollm2, ids), start=start)[0]  # fmt: skip
    blk = smollm2.blocks[3]
    monkeypatch.setattr(blk, "W_O", blk.W_O * np.float32(0.5))  # a new array: no codes
    caches = _prefilled(smollm2, ids)
    x = smollm2.E_token[token].copy()
    assert _compiled_step(smollm2, x, caches, start) is None
    assert all(c.length == start for c in caches)
    np.testing.assert_array_equal(x, smollm2.E_token[token])
    after = smollm2._forward(np.asarray([[token]]), None, keep=set(), caches=caches, start=start)[0]
    want = _numpy_step(smollm2, token, _prefilled(smollm2, ids), start, monkeypatch)
    np.testing.assert_array_equal(after[0, 0], want)  # the NumPy path, with the new matrix
    assert np.abs(after - before).max() > 1e-2  # which changed the numbers


@pytest.mark.parametrize("why", ["unanswered", "blas", "shared"])
def test_the_engine_attends_where_the_loop_should_not(smollm2, monkeypatch, why):
    """qkv.attention takes a layer's attention when ``attend`` reports a z it cannot vouch for
    ("unanswered", forced here), or where the engine would not run the loop on the calling
    thread: BLAS from as many keys as measured ("blas", from 1 key here), or a cache long
    enough to share among workers ("shared", the bound lowered here). The same numbers."""
    ids, _ = smollm2.encode(PROMPT)
    x = smollm2.E_token[9].copy()
    want = _compiled_step(smollm2, x, _prefilled(smollm2, ids), len(ids)).copy()
    asked = []

    def engine(*args, **kwargs):
        asked.append(1)
        return attention(*args, **kwargs)

    monkeypatch.setattr(token_step, "attention", engine)
    bound = 3 * (len(ids) + 1) * 2 * 64  # K/V heads × keys × (d_k + d_v) of this step
    if why == "unanswered":
        monkeypatch.setattr(token_step_jit, "attend", lambda *args: False)
    elif why == "blas":
        monkeypatch.setattr(decode_blas, "blas_from", lambda *args: 1)
    else:
        monkeypatch.setattr(decode, "PARALLEL_MIN", bound)
        monkeypatch.setattr(decode, "default_workers", lambda: 2)
    x = smollm2.E_token[9].copy()
    got = _compiled_step(smollm2, x, _prefilled(smollm2, ids), len(ids))
    assert len(asked) == smollm2.n_layers
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    if why == "shared":  # the bound one key further: the loop, here
        asked.clear()
        monkeypatch.setattr(decode, "PARALLEL_MIN", bound + 1)
        _compiled_step(smollm2, x, _prefilled(smollm2, ids), len(ids))
        assert asked == []


def test_attend_reads_the_first_positions_only_and_reports_what_it_cannot_answer(rng):
    G, r, d, S, capacity = 3, 3, 16, 37, 64
    q = rng.standard_normal((G * r, d)).astype(np.float32)
    k_buf = np.full((G, capacity, d), np.nan, np.float32)  # past S: never read
    v_buf = np.full((G, capacity, d), np.nan, np.float32)
    k_buf[:, :S] = rng.standard_normal((G, S, d))
    v_buf[:, :S] = rng.standard_normal((G, S, d))
    rows, z = np.empty((G, r, d), np.float32), np.empty((G, r, d), np.float32)
    factor = np.float32(1.4426950408889634 / np.sqrt(d))
    assert token_step_jit.attend(q, k_buf, v_buf, S, factor, compiled.NO_MASK, rows, z)
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k_buf[:, :S], v_buf[:, :S]))
    scores = np.einsum("grd,gsd->grs", q64.reshape(G, r, d), k64) / np.sqrt(d)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    want = (weights / weights.sum(-1, keepdims=True)) @ v64  # (G, r, d)
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-5)
    k_buf[1, 5] = np.inf  # a +inf score for the rows of K/V head 1 (q·k with q's signs)
    k_buf[1, 5, : d // 2], q[r : 2 * r, : d // 2] = np.inf, 1.0
    k_buf[1, 5, d // 2 :], q[r : 2 * r, d // 2 :] = 0.0, 0.5
    assert not token_step_jit.attend(q, k_buf, v_buf, S, factor, compiled.NO_MASK, rows, z)


def test_the_compiled_rms_norm_is_the_formula_in_float64(rng):
    x = (rng.standard_normal(576) * 30).astype(np.float32)
    gain = rng.standard_normal(576).astype(np.float32)
    out = np.empty(576, np.float32)
    token_step_jit.rms_norm_into(x, gain, 1e-5, out)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt(np.mean(x64 * x64) + 1e-5) * gain
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-6)
