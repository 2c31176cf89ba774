"""BLAS thread limits under concurrent attention calls."""

import threading

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import qkv
from qkv.kernels.threads import single_threaded_blas


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


def test_overlapping_limits_from_two_threads_restore_the_original():
    # A enters, B enters, A leaves, B leaves: the order that left BLAS at 1 thread for good
    # when each use saved and restored "the original" on its own.
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with single_threaded_blas():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b():
        a_in.wait(5)
        with single_threaded_blas():
            b_in.set()
            a_out.wait(5)
            seen["inside"] = _blas_threads()

    original = _blas_threads()
    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["inside"] == [1]  # B still inside after A left: still one thread
    assert _blas_threads() == original
