import numpy as np
import pytest

import qkv


@pytest.mark.parametrize("chunks", [[5, 1, 1, 1], [1] * 8, [3, 2, 3]])
def test_prefill_then_decode_equals_full_causal_pass(rng, chunks):
    mha = qkv.MultiHeadAttention(12, 6, seed=0, n_kv_heads=3)
    x = rng.normal(size=(2, sum(chunks), 12))
    full = mha(x, causal=True)
    cache, parts, start = qkv.KVCache(), [], 0
    for n in chunks:
        parts.append(mha(x[:, start : start + n], causal=True, cache=cache))
        start += n
    assert len(cache) == sum(chunks)
    assert np.allclose(np.concatenate(parts, axis=1), full, rtol=0, atol=1e-14)


def test_cache_grows_past_its_first_capacity(rng):
    cache = qkv.KVCache()
    ks = [rng.normal(size=(2, 1, 3)) for _ in range(40)]
    for k in ks:
        allk, allv = cache.update(k, 2 * k)
    assert np.array_equal(allk, np.concatenate(ks, axis=1))
    assert np.array_equal(allv, 2 * allk)


def test_cache_with_a_capacity_writes_into_one_buffer(rng):
    cache = qkv.KVCache(capacity=12)
    ks = [rng.normal(size=(2, 3, n, 4)) for n in (5, 1, 1, 5)]
    buffers = []
    for k in ks:
        allk, allv = cache.update(k, -k)
        buffers.append(cache._k)
    assert all(b is buffers[0] for b in buffers) and buffers[0].shape == (2, 3, 12, 4)
    assert np.array_equal(allk, np.concatenate(ks, axis=-2)) and np.array_equal(allv, -allk)
    allk, _ = cache.update(ks[0], ks[0])  # past the capacity: it grows, nothing lost
    assert len(cache) == 17 and np.array_equal(allk[..., 12:, :], ks[0])
    with pytest.raises(ValueError, match="capacity must be a positive integer, got 0"):
        qkv.KVCache(capacity=0)


def test_positions_written_in_place_count_as_cached_and_survive_growth(rng):
    cache = qkv.KVCache(capacity=3)
    with pytest.raises(ValueError, match="needs a cache that holds a first chunk"):
        cache.append_in_place(1, lambda k, v, at: None)
    first = rng.normal(size=(2, 3, 2, 4))
    cache.update(first, -first)
    want = [first]
    for _ in range(3):  # the second append outgrows the capacity of 3
        new = rng.normal(size=(2, 3, 1, 4))

        def write(k_buf, v_buf, at, new=new):
            k_buf[..., at : at + 1, :], v_buf[..., at : at + 1, :] = new, -new

        cache.append_in_place(1, write)
        want.append(new)
    assert len(cache) == 5 and cache.buffers[0].shape[-2] >= 5
    assert np.array_equal(cache.k, np.concatenate(want, axis=-2))
    assert np.array_equal(cache.v, -cache.k)

    def fails(k_buf, v_buf, at):
        k_buf[..., at, :] = np.nan  # written, then refused: not counted
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        cache.append_in_place(1, fails)
    with pytest.raises(ValueError, match="t must be a positive integer, got 0"):
        cache.append_in_place(0, write)
    assert len(cache) == 5 and np.array_equal(cache.k, np.concatenate(want, axis=-2))


def test_cache_refuses_a_changed_shape(rng):
    cache = qkv.KVCache()
    cache.update(np.zeros((2, 3, 4)), np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match=r"k must match the cached"):
        cache.update(np.zeros((3, 1, 4)), np.zeros((3, 1, 4)))


def test_cache_with_context_is_refused(rng):
    mha = qkv.MultiHeadAttention(4, 2, seed=0)
    with pytest.raises(ValueError, match="cache="):
        mha(np.zeros((1, 4)), np.zeros((3, 4)), cache=qkv.KVCache())


def _state(cache):
    return len(cache), None if cache.k is None else (cache.k.copy(), cache.v.copy())


@pytest.mark.parametrize(
    "k, v, error, match",
    [
        (np.zeros((2, 1, 4)), np.zeros((2, 1, 5)), TypeError, r"holds ndarray of float32.*float64"),
        (np.zeros((2, 1, 4), np.int64), np.zeros((2, 1, 5), np.int64), TypeError, "floating"),
        (np.zeros((2, 1, 4), np.float16), np.zeros((2, 1, 5), np.float16), TypeError, "float16"),
        (np.zeros((2, 1, 4), np.float32), np.zeros((2, 2, 5), np.float32), ValueError, "length"),
        (
            np.zeros((2, 1, 4), np.float32),
            np.zeros((2, 1, 5), np.float64),
            TypeError,
            "one floating",
        ),
        (np.zeros((3, 1, 4), np.float32), np.zeros((3, 1, 5), np.float32), ValueError, "cached"),
        (np.zeros((2, 1, 7), np.float32), np.zeros((2, 1, 5), np.float32), ValueError, "cached"),
        (np.zeros(4, np.float32), np.zeros((2, 1, 5), np.float32), ValueError, "length, d"),
    ],
)
def test_a_refused_chunk_leaves_the_cache_as_it_was(rng, k, v, error, match):
    cache = qkv.KVCache()
    cache.update(
        rng.normal(size=(2, 3, 4)).astype(np.float32), rng.normal(size=(2, 3, 5)).astype(np.float32)
    )
    before = _state(cache)
    with pytest.raises(error, match=match):
        cache.update(k, v)
    after = _state(cache)
    assert after[0] == before[0] == 3 and cache.k.dtype == np.float32
    assert all(np.array_equal(a, b) for a, b in zip(after[1], before[1], strict=False))


def test_the_first_chunk_fixes_the_dtype_and_torch_chunks_are_refused_by_a_numpy_cache():
    torch = pytest.importorskip("torch")
    cache = qkv.KVCache()
    cache.update(np.ones((1, 2, 3), np.float64), np.ones((1, 2, 3), np.float64))
    with pytest.raises(TypeError, match=r"ndarray of float64.*Tensor"):
        cache.update(
            torch.ones(1, 1, 3, dtype=torch.float64), torch.ones(1, 1, 3, dtype=torch.float64)
        )
    k, v = cache.update(np.full((1, 1, 3), 2.0), np.full((1, 1, 3), 3.0))
    assert k.dtype == np.float64 and k[0, :, 0].tolist() == [1, 1, 2] and len(cache) == 3
