"""Ring attention over 2 and 4 local gloo processes against single-process qkv.attention; the
launcher's failure paths (a failing rank, Ctrl-C) leave no process and no file behind."""

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="ring attention runs on torch.distributed")

import qkv  # noqa: E402
from qkv import steps  # noqa: E402
from qkv.distributed import check, launch  # noqa: E402

CASES = [
    check.Setup(T=37, heads=2, d=5, causal=False, grad=True),
    check.Setup(T=37, heads=2, d=5, causal=True, grad=True, temperature=0.7, scale=0.3),
    check.Setup(T=23, heads=1, d=8, causal=True, dtype="float32"),
    check.Setup(T=29, heads=3, d=4, causal=False, dtype="float32", temperature=2.0),
    # a few query rows at a time (2 heads × ~10 keys × 8 bytes = 160 bytes a row)
    check.Setup(T=41, heads=2, d=3, causal=True, grad=True, chunk_bytes=400),
    # fewer positions than ranks (with 4): the last ranks hold empty slices
    check.Setup(T=3, heads=2, d=4, causal=True, grad=True),
    check.Setup(T=2, heads=1, d=3, causal=False, grad=True, temperature=0.5),
]


@pytest.fixture(
    scope="module",
    params=[2, pytest.param(4, marks=pytest.mark.slow)],
    ids=["2 ranks", "4 ranks"],
)
def reports(request):
    world = request.param
    per_rank = launch.run(check.workers, world, CASES, timeout_s=60)
    return world, [check.compare([r[i] for r in per_rank], setup) for i, setup in enumerate(CASES)]


def test_output_equals_single_process_attention(reports):
    world, reps = reports
    for setup, rep in zip(CASES, reps, strict=False):
        assert rep["world_size"] == world
        if setup.dtype == "float64":
            assert rep["max_abs_diff"] <= 1e-10, setup
        else:  # within float32's bound: see check.float32_tolerance
            assert rep["max_abs_diff"] <= rep["tolerance"], setup


def test_gradients_equal_single_process_gradients(reports):
    _, reps = reports
    for setup, rep in zip(CASES, reps, strict=False):
        if setup.grad:
            assert max(rep["grad_max_abs_diff"]) <= 1e-10, setup


def test_each_rank_sends_its_share_of_k_and_v(reports):
    world, reps = reports
    setup, rep = CASES[0], reps[0]
    kv = 2 * setup.heads * setup.T * setup.d * 8
    sent = sum(rep["bytes_sent_per_rank"])
    assert sent == (world - 1) * kv  # every block travels N − 1 hops in the forward pass
    for b in rep["bytes_sent_per_rank"]:
        assert abs(b - kv * (world - 1) / world) <= 2 * setup.heads * setup.d * 8 * (world - 1)


def test_float32_tolerance_by_hand():
    u = 2.0**-24
    # no merge (one block per row): twice the one-process error and one rounding of each output
    assert check.float32_tolerance(1e-6, merges=0, max_v=3.0, max_score=5.0, T=7) == 2e-6 + 6 * u
    # T = 1: ln T = 0, so ℓ = max_score = 2; one merge: (ℓ + 9) + 1·4/4·(ℓ + 0 + 4) = 17
    assert check.float32_tolerance(0.0, merges=1, max_v=1.0, max_score=2.0, T=1) == 19 * u
    # three merges, ℓ = 0: 3·9 + 3·6/4·4 = 45, with V = 2
    assert check.float32_tolerance(0.0, merges=3, max_v=2.0, max_score=0.0, T=1) == 2 * 47 * u
    with pytest.raises(ValueError, match="merges must be ≥ 0 and T ≥ 1, got merges=-1, T=3"):
        check.float32_tolerance(0.0, merges=-1, max_v=1.0, max_score=1.0, T=3)


def test_float32_reports_count_the_merges_of_the_ring(reports):
    # the bound grows with the merges a row goes through: N − 1 of them (fewer ranks hold keys
    # when T < N), each adding at least 9u·V
    world, reps = reports
    for setup, rep in zip(CASES, reps, strict=False):
        if setup.dtype == "float32":
            q, k, v, _ = check.inputs(setup, 0, setup.T)
            merges = min(world, setup.T) - 1
            assert rep["tolerance"] >= 2 * rep["reference_error"] + (2 + 9 * merges) * (
                2.0**-24 * np.abs(v).max()
            )


def test_slices_cover_the_sequence_unevenly():
    assert check.bounds(37, 4) == [(0, 10), (10, 19), (19, 28), (28, 37)]
    assert check.bounds(3, 4) == [(0, 1), (1, 2), (2, 3), (3, 3)]


@pytest.mark.parametrize("world", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_a_failing_rank_stops_the_others_with_its_own_error_and_leaves_no_file(
    world, tmp_path, monkeypatch
):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the ranks would write error files
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(RuntimeError) as e:
        launch.run(check.worker, world, check.Setup(T=8, fail_rank=1), timeout_s=20)
    assert str(e.value) == (
        "a rank failed, so the ring stopped: rank 1: ValueError: rank 1 was asked to fail"
    )
    assert multiprocessing.active_children() == []  # the other ranks were stopped
    assert list(tmp_path.iterdir()) == []


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc: Linux)."""
    children = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            pass
    return children.union(*(_descendants(c) for c in children)) if children else children


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize(
    "to_group, after_s",
    [(True, 1.0), (False, 1.0), (True, 0.1)],
    ids=["terminal Ctrl-C", "parent only", "terminal Ctrl-C while the ranks import"],
)
def test_ctrl_c_stops_the_parent_and_every_rank(to_group, after_s):
    # a hang is what this catches; the bound is loose so a loaded machine does not fail it
    code = "import sys\nfrom qkv.cli import main\nmain(sys.argv[1:], prog_name='qkv')\n"
    parent = subprocess.Popen(
        [sys.executable, "-c", code, "ring", "-n", "2", "--T", "80000"],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(ranks := _descendants(parent.pid)) < 2:  # both ranks started
            assert parent.poll() is None and time.monotonic() < deadline, parent.stderr.read()
            time.sleep(0.1)
        time.sleep(after_s)  # 1 s: into the ring's rendezvous and work; 0.1 s: still importing
        if to_group:  # what a terminal does: SIGINT to the whole foreground group
            os.killpg(parent.pid, signal.SIGINT)
        else:
            parent.send_signal(signal.SIGINT)
        stopped = time.monotonic() + 30
        parent.wait(timeout=30)
        while any(map(_running, ranks)) and time.monotonic() < stopped:
            time.sleep(0.05)
        assert not any(map(_running, ranks)), ranks
        assert "Traceback" not in parent.stderr.read()
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()


def test_one_process_ring_is_plain_attention():
    rep = launch.run(check.worker, 1, CASES[1], timeout_s=30)
    assert check.compare(rep, CASES[1])["max_abs_diff"] <= 1e-12


def test_merge_of_partials_equals_attention_over_all_keys(rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 2))
    mask = np.ones((3, 7), bool)
    mask[0, :3] = False  # query 0 sees nothing of the first block

    def part(a, b):
        m = mask[:, a:b]
        s = steps.apply_mask(steps.scale(steps.scores(q, k[a:b]), 0.5), m)
        return steps.weighted_sum(steps.softmax(s, m), v[a:b], m), steps.logsumexp(s, m)

    z, lse = steps.merge_partials(*part(0, 3), *part(3, 7))
    assert np.allclose(z, qkv.attention(q, k, v, mask=mask), atol=1e-15)
    s = steps.scale(steps.scores(q, k), 0.5)
    ref = np.log(np.sum(np.where(mask, np.exp(s), 0), axis=-1))  # float64 by hand
    assert np.allclose(lse, ref, atol=1e-14)


def test_bad_shapes_are_refused_before_any_communication():
    from qkv.distributed import ring_attention

    with pytest.raises(ValueError, match=r"same positions.*\(3, 4\).*\(5, 4\)"):
        ring_attention(torch.zeros(3, 4), torch.zeros(5, 4), torch.zeros(5, 4))
