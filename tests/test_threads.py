"""BLAS thread limits under concurrent attention calls."""

import threading

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import qkv
from qkv.blas import single_threaded_blas


def _blas_threads():
    return sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})


def test_attention_from_four_threads_leaves_blas_as_it_was(rng):
    q, k, v = (rng.normal(size=(2, 200, 16)).astype(np.float32) for _ in range(3))
    expected = qkv.attention(q, k, v, backend="reference")
    original = _blas_threads()  # OpenBLAS starts with one thread per core here
    start, errors = threading.Barrier(4), []

    def work():
        start.wait()
        for _ in range(20):
            out = qkv.attention(q, k, v, backend="blocked")
            if not np.allclose(out, expected, atol=1e-5):
                errors.append("wrong result")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert _blas_threads() == original


def test_nested_limits_hold_until_the_outer_one_ends():
    with threadpool_limits(limits=2, user_api="blas"):
        with single_threaded_blas():
            with single_threaded_blas():
                assert _blas_threads() == [1]
            assert _blas_threads() == [1]
        assert _blas_threads() == [2]


def _overlap(first_stays_alive):
    """A enters, B enters, A leaves, B leaves; A's thread ends before B leaves or only after.
    Returns what B saw inside after A left, and the counts after both left."""
    a_in, b_in, a_out, b_out = (threading.Event() for _ in range(4))
    seen = {}

    def a():
        with single_threaded_blas():
            a_in.set()
            b_in.wait(5)
        a_out.set()
        if first_stays_alive:
            b_out.wait(5)

    def b():
        a_in.wait(5)
        with single_threaded_blas():
            b_in.set()
            a_out.wait(5)
            seen["inside"] = _blas_threads()
        b_out.set()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return seen["inside"], _blas_threads()


def test_overlapping_limits_from_two_threads_restore_the_original():
    # The first user limits, the last restores: different threads. threadpoolctl ≥ 3.8 ignored
    # the restore while the first thread was still alive (it held the control), which left
    # BLAS at one thread for good in a few runs in a hundred; both orders, many times.
    original = _blas_threads()
    for i in range(200):
        inside, after = _overlap(first_stays_alive=i % 2 == 0)
        assert inside == [1], i  # B still inside after A left: still one thread
        assert after == original, i


def test_a_limit_from_the_main_thread_is_restored_by_a_worker_thread():
    # The main thread never ends: under threadpoolctl's rule it would keep the control for good.
    original = _blas_threads()
    use = single_threaded_blas()
    use.__enter__()  # main enters first
    inside, left = threading.Event(), threading.Event()

    def worker():
        with single_threaded_blas():
            inside.set()
            left.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(5)
    use.__exit__(None, None, None)  # main leaves; the worker is last and restores
    assert _blas_threads() == [1]
    left.set()
    t.join()
    assert _blas_threads() == original


def test_a_use_from_a_worker_thread_limits_blas_and_keeps_no_hold_on_it():
    # threadpoolctl lets only the thread holding its control change OpenBLAS: a use from a
    # worker thread must take effect, and let go, so that the main thread's own limits apply.
    used, done = threading.Event(), threading.Event()
    seen = {}

    def user():
        with single_threaded_blas():
            seen["inside"] = _blas_threads()
        used.set()
        done.wait(5)  # still alive while the main thread sets its own limits

    t = threading.Thread(target=user)
    t.start()
    used.wait(5)
    try:
        assert seen["inside"] == [1]
        with threadpool_limits(limits=1, user_api="blas"):
            assert _blas_threads() == [1]
        with threadpool_limits(limits=2, user_api="blas"):
            assert _blas_threads() == [2]
    finally:
        done.set()
        t.join()


def test_a_large_product_split_by_rows_equals_float64_and_leaves_blas_as_it_was(rng, monkeypatch):
    """threads.rows_product: (M, K) @ (K, N) as one block of rows per worker (BLAS on one
    thread each), or one call when small; float32 within rounding of float64 either way."""
    from qkv.kernels import threads

    original = _blas_threads()
    monkeypatch.setattr(threads, "default_workers", lambda: 3)
    split = []
    pool = threads.pool

    def spied(workers):
        split.append(workers)
        return pool(workers)

    monkeypatch.setattr(threads, "pool", spied)
    monkeypatch.setattr(threads, "SPLIT_ROWS", 16)  # rows per worker at least
    for M, splits in ((1, []), (40, []), (301, [3]), (47, [2])):
        a = rng.standard_normal((M, 96)).astype(np.float32)
        b = rng.standard_normal((96, 160)).astype(np.float32)
        monkeypatch.setattr(threads, "PRODUCT_SPLIT", 40 * 96 * 160 + 1)  # 40 rows: one call
        split.clear()
        out = threads.rows_product(a, b)
        assert out.dtype == np.float32 and out.shape == (M, 160)
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=0, atol=2e-5)
        assert split == splits, M
    assert _blas_threads() == original
