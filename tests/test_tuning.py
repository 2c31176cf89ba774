"""The tile tuner (kernels/tuning.py) on a tiny problem and budget, in temporary cache
directories: what it measures is used, kept, read back, and rejected when it cannot be trusted."""

import json

import numpy as np
import pytest

import qkv
from qkv.kernels import blocked, compiled, fused, processor, tuning

SMALL = (tuning.Tiles(16, 32), tuning.Tiles(8, 64), tuning.DEFAULT)


@pytest.fixture
def tuner(tmp_path, monkeypatch):
    """Tuning on, a cache directory of its own, a problem that takes milliseconds."""
    monkeypatch.setenv("QKV_TUNE", "on")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tuning, "PROBLEM", {"heads": 1, "T": 96, "d": 8})
    monkeypatch.setattr(tuning, "CANDIDATES", SMALL)
    tuning.reset()
    yield tmp_path / "qkv" / "tiles.json"
    tuning.reset()


def _kernel():
    return fused.ON_BLAS if fused.available() else blocked.TUNED


def test_first_use_measures_and_writes_the_cache_a_new_process_reads(tuner):
    kernel = _kernel()
    name = kernel.name
    first = tuning.choice(kernel)
    assert first.source == "measured now" and first.note == ""
    assert sorted(t for t, _ in first.table) == sorted(SMALL)
    assert first.tiles == first.table[0][0]  # the fastest
    assert [s for _, s in first.table] == sorted(s for _, s in first.table)
    saved = json.loads(tuner.read_text())
    assert saved["key"]["processor"] == processor.current().key
    assert saved["key"]["numpy"] == np.__version__
    assert (saved["kernels"][name]["block_q"], saved["kernels"][name]["block_k"]) == (
        first.tiles.block_q,
        first.tiles.block_k,
    )
    tuning.forget()  # what a new process sees
    again = tuning.choice(kernel)
    assert again.source == "cache" and again.tiles == first.tiles and again.table == first.table


@pytest.mark.parametrize(
    "content",
    [b"\x00\xff not json", b'{"key": 1}', b"[1, 2]", b'{"key": {}, "kernels": {}}'],
    ids=["bytes", "no kernels", "a list", "another key"],
)
def test_a_corrupt_cache_is_rejected_and_rebuilt(tuner, content):
    kernel = _kernel()
    name = kernel.name
    tuner.parent.mkdir(parents=True)
    tuner.write_bytes(content)
    c = tuning.choice(kernel)
    assert c.source == "measured now" and c.note.startswith(f"rejected {tuner}")
    rebuilt = json.loads(tuner.read_text())
    assert rebuilt["key"]["processor"] == processor.current().key and name in rebuilt["kernels"]


def test_a_cache_from_another_processor_is_rejected_and_rebuilt(tuner):
    kernel = _kernel()
    name = kernel.name
    tuning.choice(kernel)
    saved = json.loads(tuner.read_text())
    saved["key"]["processor"]["model"] = "Some Other CPU 9000"
    saved["kernels"][name]["block_q"] = 3  # a choice made there: not to be used here
    tuner.write_text(json.dumps(saved))
    tuning.forget()
    c = tuning.choice(kernel)
    assert c.source == "measured now" and "another processor" in c.note
    assert c.tiles in SMALL
    assert json.loads(tuner.read_text())["key"]["processor"] == processor.current().key


def test_a_cache_written_for_older_kernels_is_rejected_and_rebuilt(tuner):
    kernel = _kernel()
    name = kernel.name
    tuning.choice(kernel)
    saved = json.loads(tuner.read_text())
    saved["key"]["kernels"] = tuning.KERNELS - 1
    saved["kernels"][name]["block_q"] = 3  # chosen for the old loops: not to be used now
    tuner.write_text(json.dumps(saved))
    tuning.forget()
    c = tuning.choice(kernel)
    assert c.source == "measured now" and "older kernels" in c.note
    assert c.tiles in SMALL
    assert json.loads(tuner.read_text())["key"]["kernels"] == tuning.KERNELS


def test_an_entry_that_does_not_parse_is_measured_again(tuner):
    kernel = _kernel()
    name = kernel.name
    tuning.choice(kernel)
    saved = json.loads(tuner.read_text())
    saved["kernels"][name]["block_q"] = -4
    tuner.write_text(json.dumps(saved))
    tuning.forget()
    c = tuning.choice(kernel)
    assert c.source == "measured now" and c.tiles in SMALL


def test_an_unwritable_cache_still_gives_the_measured_tiles(tmp_path, tuner, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # the cache directory cannot be made
    c = tuning.choice(_kernel())
    assert c.source == "measured now" and c.tiles in SMALL and "could not write" in c.note


def test_kernels_use_what_the_tuner_chose_and_agree_with_float64(tuner, monkeypatch):
    monkeypatch.setattr(tuning, "MIN_SCORES", 0)
    chosen = tuning.choice(blocked.TUNED).tiles
    seen = []

    class Recording(blocked._Plan):
        def __init__(self, *args):
            super().__init__(*args)
            seen.append(args[5:7])  # (block_q, block_k) the plan was given

    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((3, 97, 8)) for _ in range(3))
    want = qkv.attention(q, k, v, causal=True, backend="reference")
    out = blocked.blocked_attention(q, k, v, causal="bottom-right", scale=8**-0.5, plan=Recording)
    assert seen == [(chosen.block_q, chosen.block_k)]
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-12)
    if fused.available():
        tuning.choice(fused.ON_BLAS)
        out = fused.fused_attention(q, k, v, causal="bottom-right", scale=8**-0.5)
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-12)


@pytest.mark.skipif(not fused.available(), reason="the strip kernel needs numba")
def test_the_strip_kernel_takes_the_rows_it_measured(tuner, monkeypatch):
    """The strip kernel's query rows per tile are measured among its own choices (here two,
    neither its built-in 1,024), kept under "strips", and used by a float32 call (4 heads of
    300 rows: no halving for one worker)."""
    own = tuning.Kernel(
        "strips",
        fused.fused_attention,
        candidates=(tuning.Tiles(128, 512), tuning.Tiles(512, 512)),
        default=fused.strips_kernel().default,
    )
    assert own.built_in not in own.choices
    assert tuning.DEFAULT.block_q not in [t.block_q for t in own.choices]
    monkeypatch.setattr(fused, "strips_kernel", lambda: own)
    monkeypatch.setattr(tuning, "PROBLEM", {"heads": 1, "T": 96, "d": 16})  # 16 lanes too
    c = tuning.choice(own)
    assert c.source == "measured now" and c.tiles in own.choices
    assert sorted(t for t, _ in c.table) == sorted(own.choices)
    assert "strips" in json.loads(tuner.read_text())["kernels"]
    monkeypatch.setattr(tuning, "MIN_SCORES", 0)
    seen = []

    class Recording(fused._FusedPlan):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            seen.append((args[5], kwargs["own"]))  # (block_q, on the strips) it was given

    monkeypatch.setattr(fused, "_FusedPlan", Recording)
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((4, 300, 16), dtype=np.float32) for _ in range(3))
    out = fused.fused_attention(q, k, v, causal="bottom-right", scale=0.25, workers=1)
    assert seen == [(c.tiles.block_q, True)]
    wide = [a.astype(np.float64) for a in (q, k, v)]
    want = qkv.attention(*wide, causal=True, scale=0.25, backend="reference")
    np.testing.assert_allclose(out, want, rtol=0, atol=5e-6)
    monkeypatch.setenv("QKV_TUNE", "off")
    assert tuning.choice(own).tiles == own.built_in


def test_a_cached_choice_no_longer_among_the_kernels_choices_is_measured_again(tuner):
    """The cache's entry for one kernel names tiles that are not among its choices now: that
    kernel is measured again, and the other kernels' entries are kept."""
    kernel = _kernel()
    name = kernel.name
    first = tuning.choice(kernel)
    other = tuning.choice(tuning.Kernel("other", blocked.blocked_attention))
    tuning.forget()
    moved = tuning.Kernel(name, kernel.run, candidates=(tuning.Tiles(8, 16), tuning.Tiles(24, 48)))
    again = tuning.choice(moved)
    assert again.source == "measured now" and again.tiles in moved.choices
    assert f"{first.tiles} is not among the choices" in again.note
    tuning.forget()
    assert tuning.choice(moved).source == "cache"
    kept = tuning.choice(tuning.Kernel("other", blocked.blocked_attention))
    assert kept.source == "cache" and kept.tiles == other.tiles


def test_small_calls_and_tuning_off_never_measure(tuner, monkeypatch):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 64, 8), dtype=np.float32) for _ in range(3))
    blocked.blocked_attention(q, k, v)  # 2·64·64 scores: below MIN_SCORES
    assert not tuner.exists()
    monkeypatch.setattr(tuning, "MIN_SCORES", 0)
    monkeypatch.setenv("QKV_TUNE", "off")
    blocked.blocked_attention(q, k, v)
    assert not tuner.exists()
    assert tuning.tiles(blocked.TUNED, 1 << 30) == tuning.DEFAULT
    assert tuning.choice(blocked.TUNED).source == "default (QKV_TUNE=off)"


def test_forced_tiles_win_inside_the_block_only(tuner):
    with tuning.forced(tuning.Tiles(3, 5)):
        assert tuning.tiles(blocked.TUNED, 1 << 30) == tuning.Tiles(3, 5)
    assert not tuner.exists()  # forcing measures nothing


def test_bad_setting_and_bad_tiles_are_named(monkeypatch):
    monkeypatch.setenv("QKV_TUNE", "maybe")
    with pytest.raises(ValueError, match="QKV_TUNE must be 'on' or 'off', got 'maybe'"):
        tuning.enabled()
    with pytest.raises(ValueError, match=r"block_k must be an integer in \[1, 65536\], got 0"):
        tuning.Tiles(4, 0)


@pytest.mark.skipif(not fused.available(), reason="the strip kernel needs numba")
def test_the_strip_rows_are_halved_until_every_worker_has_four_tiles(monkeypatch):
    """Tuning off: the built-in rows, halved while units · tiles per unit < 4 · workers for two
    or more workers (down to 128 rows), never for one; forced tiles are taken as they are."""
    monkeypatch.setenv("QKV_TUNE", "off")
    rows, keys = fused.strips_kernel().built_in.block_q, fused.strips_kernel().built_in.block_k
    one_tile = 2**30  # scores: a size the tuner would measure
    assert fused._strip_tiles(1, 4 * rows, 1, one_tile) == tuning.Tiles(rows, keys)
    assert fused._strip_tiles(1, 100, 1, one_tile) == tuning.Tiles(rows, keys)  # one tile
    assert fused._strip_tiles(1, 4 * rows, 2, one_tile) == tuning.Tiles(rows // 2, keys)
    assert fused._strip_tiles(1, 100, 8, one_tile).block_q == 128  # never under 128
    with tuning.forced(tuning.Tiles(3, 5)):
        assert fused._strip_tiles(1, 100, 8, one_tile) == tuning.Tiles(3, 5)


def test_the_blocked_kernel_asks_for_its_tiles_once_units_and_workers_are_known():
    """The tiles= hook gets the units (batch · K/V heads, broadcast), the query rows per unit,
    the workers as they were settled (one for a small call) and the broadcast count of scores;
    the tiles it returns are the plan's, and the answer stays exact."""
    asked, seen = [], []

    def hook(units, rows, workers, scores):
        asked.append((units, rows, workers, scores))
        return tuning.Tiles(5, 7)

    class Recording(blocked._Plan):
        def __init__(self, *args):
            super().__init__(*args)
            seen.append(args[5:7])  # (block_q, block_k) the plan was given

    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 4, 6, 8))  # one batch entry, broadcast against k's three
    k, v = (rng.standard_normal((3, 2, 11, 8)) for _ in range(2))  # 2 K/V heads: 2 rows each
    out = blocked.blocked_attention(
        q, k, v, causal="bottom-right", scale=0.3, tiles=hook, plan=Recording
    )
    assert asked == [(3 * 2, 2 * 6, 1, 3 * 2 * 2 * 6 * 11)]
    assert seen == [(5, 7)]
    want = qkv.attention(q, k, v, causal=True, scale=0.3, backend="reference")
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-12)
    blocked.blocked_attention(q, k, v, block_q=4, block_k=4, tiles=hook)  # both given: not asked
    assert len(asked) == 1


def test_a_cached_choice_outside_the_shared_candidates_is_measured_again(tuner, monkeypatch):
    """A kernel without candidates of its own takes CANDIDATES as they are now: a cached choice
    that is no longer among them is measured again."""
    first = tuning.choice(blocked.TUNED)
    tuning.forget()
    others = tuple(t for t in SMALL if t != first.tiles)
    monkeypatch.setattr(tuning, "CANDIDATES", others)
    again = tuning.choice(blocked.TUNED)
    assert again.source == "measured now" and again.tiles in others
    assert f"{first.tiles} is not among the choices" in again.note


@pytest.mark.skipif(not fused.available(), reason="the decode loop needs numba")
def test_a_decoding_step_reads_a_cache_and_its_view_as_measured(tuner, monkeypatch):
    """Every row sees every key of a cache of 600 keys: the tuner's "decode" choice (here the
    compiled loop, by a timer that favours it) decides for a contiguous cache and for a view
    into a longer buffer, which the loop reads in place one K/V head at a time; keys of another
    stride go through BLAS, which reads them in place; so does tuning off. Each answer matches float64."""
    from qkv.kernels import decode_blas

    timed = []

    def timer(run):
        def seconds(t):
            timed.append(t)
            return 1.0 if t.block_k == decode_blas.DECODE_BLAS_KEYS else 0.5

        return seconds

    choices = decode_blas.CHOICES
    decode = tuning.Kernel("decode", fused.fused_attention, choices, choices[0], timer)
    monkeypatch.setattr(fused, "DECODE", decode)
    monkeypatch.setattr(tuning, "MIN_SCORES", 0)
    steps, step = [], decode_blas.step
    monkeypatch.setattr(decode_blas, "step", lambda *a: steps.append(1) or step(*a))
    rng = np.random.default_rng(6)
    q = rng.standard_normal((1, 4, 1, 16), dtype=np.float32)
    buffer = rng.standard_normal((2, 1, 2, 1200, 16), dtype=np.float32)  # (k|v, B, G, cap, d)
    view = buffer[:, :, :, :600]  # a cache's first 600 keys: not contiguous
    whole = np.ascontiguousarray(view)

    def check(k, v):
        out = fused.fused_attention(q, k, v, causal="bottom-right", scale=0.25)
        wide = [a.astype(np.float64) for a in (q, k, v)]
        want = qkv.attention(*wide, causal=True, scale=0.25, backend="reference")
        np.testing.assert_allclose(out, want, rtol=0, atol=2e-6)
        return len(steps)

    read = []
    loop = compiled.kernels()["decode"]
    monkeypatch.setitem(compiled.kernels(), "decode", lambda *a: read.append(a[1]) or loop(*a))
    assert check(*whole) == 0 and timed  # measured, and the loop ran
    assert tuning.choice(decode).tiles.block_k == decode_blas.DECODE_LOOP_KEYS
    assert [k.shape for k in read] == [(2, 600, 16)]  # both K/V heads in one call
    read.clear()
    assert check(*view) == 0  # a view: the loop too, one K/V head a call, in the buffer itself
    assert [k.shape for k in read] == [(1, 600, 16)] * 2
    assert all(np.shares_memory(k, buffer) for k in read)
    read.clear()
    strided = buffer[:, :, :, :1200:2]  # every other key: BLAS reads those rows in place
    assert check(*strided) == 1 and read == []
    monkeypatch.setenv("QKV_TUNE", "off")
    assert check(*whole) == 2  # the built-in rule: BLAS from 512 keys


def test_a_cached_choice_timed_on_another_problem_is_measured_again(tuner):
    kernel = _kernel()
    tuning.choice(kernel)
    saved = json.loads(tuner.read_text())
    saved["kernels"][kernel.name]["problem"] = "some other problem"
    tuner.write_text(json.dumps(saved))
    tuning.forget()
    c = tuning.choice(kernel)
    assert c.source == "measured now" and "another problem" in c.note
    assert json.loads(tuner.read_text())["kernels"][kernel.name]["problem"] == kernel.measured_on
