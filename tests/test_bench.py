"""``qkv bench`` as CI runs it: a --quick smoke run; no timing is asserted."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from qkv.bench import pinned
from qkv.bench.peers import PEERS, TORCH_PEERS, Config, float64_reference, inputs
from qkv.cli.bench import bench
from qkv.kernels import decode_blas, fused, processor, tuning
from qkv.kernels.threads import default_workers, single_threaded_blas


@pytest.mark.slow
def test_quick_json_reports_every_config_and_peer_at_each_thread_count():
    result = CliRunner().invoke(bench, ["--quick", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    cpus = sorted(os.sched_getaffinity(0))
    assert [r["threads"] for r in report["runs"]] == sorted({1, len(cpus)})
    for run in report["runs"]:
        assert run["cpus"] == cpus[: run["threads"]]  # pinned to the first n usable CPUs
        assert run["gemm"]["gflops"] > 0 and run["copy"]["gb_per_s"] > 0
        kinds = [(c["config"]["causal"], c["config"]["decode"]) for c in run["configs"]]
        assert kinds == [(False, False), (True, False), (False, True)]
        last = run is report["runs"][-1]  # peak memory: measured at the largest count only
        for entry in run["configs"]:
            assert "memory_error" not in entry
            peers = [row["peer"] for row in entry["results"]]
            assert peers == list(PEERS) or peers == [p for p in PEERS if p not in TORCH_PEERS]
            sdpa = {r["peer"]: r["median_s"] for r in entry["results"]}.get("torch sdpa")
            for row in entry["results"]:
                assert 0 < row["best_s"] <= row["median_s"] and row["gflops"] > 0
                assert row["max_abs_err"] < 1e-5, row  # float32 against float64
                flops = entry["config"]["flops"]
                assert row["gflops"] == pytest.approx(flops / row["median_s"] / 1e9)
                assert row["pct_peak"] == pytest.approx(  # best against best
                    100 * flops / row["best_s"] / 1e9 / run["gemm"]["gflops"]
                )
                if sdpa is not None:  # the ratio to SDPA in the same run
                    assert row["vs_sdpa"] == pytest.approx(sdpa / row["median_s"])
                if last:
                    assert isinstance(row["peak_extra_bytes"], int)
                    assert row["peak_extra_bytes"] >= 0
                else:
                    assert "peak_extra_bytes" not in row
                if entry["config"]["decode"]:  # memory speed against the copy bandwidth
                    assert row["kv_gb_per_s"] > 0 and row["pct_copy"] > 0
                    assert row["kv_gb_per_s"] == pytest.approx(
                        2 * 2 * 256 * 32 * 4 / row["median_s"] / 1e9
                    )
                    assert row["pct_copy"] == pytest.approx(  # best against best
                        100 * 2 * 2 * 256 * 32 * 4 / row["best_s"] / 1e9 / run["copy"]["gb_per_s"]
                    )
    machine = report["machine"]  # the header's facts: processor, BLAS, its kernel
    assert machine["processor"]["cores"] == os.cpu_count()
    assert machine["processor"]["vector_bits"] in (0, 128, 256, 512)
    blas = [lib for lib in machine["blas"] if lib["user_api"] == "blas"]
    assert blas and all(lib["num_threads"] >= 1 and "architecture" in lib for lib in blas)
    assert "OPENBLAS_CORETYPE" in machine["env"]


def test_table_header_names_processor_blas_kernel_and_threads():
    args = [
        "--T",
        "64",
        "--heads",
        "1",
        "--d",
        "8",
        "--decode",
        "--skip-full",
        "--min-time",
        "0",
        "--peers",
        "qkv blocked",
        "--no-memory",
        "--gemm-size",
        "64",
        "--threads",
        "1",
    ]
    result = CliRunner().invoke(bench, args)
    assert result.exit_code == 0, result.output
    assert processor.current().model in result.output and "blas: " in result.output
    assert "1 thread on CPU " in result.output and "2 threads" not in result.output
    assert "copy bandwidth" in result.output and "K,V GB/s" in result.output


def test_pinned_tells_every_library_the_same_count_and_restores_it():
    torch = pytest.importorskip("torch")
    from threadpoolctl import threadpool_info

    before = (os.sched_getaffinity(0), torch.get_num_threads())
    cpus = sorted(before[0])
    with pinned.pinned(1) as where:
        assert where == cpus[:1] and os.sched_getaffinity(0) == {cpus[0]}
        assert torch.get_num_threads() == 1
        assert {lib["num_threads"] for lib in threadpool_info()} == {1}
        assert default_workers() == 1  # qkv's kernels start one worker
    with pinned.pinned(len(cpus)):
        with single_threaded_blas():  # the kernels' workers still get one BLAS thread each
            assert {
                lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"
            } == {1}
        assert {lib["num_threads"] for lib in threadpool_info()} == {len(cpus)}
    assert (os.sched_getaffinity(0), torch.get_num_threads()) == before


@pytest.mark.parametrize("spec", ["0", "x", "1,99", ",", "1.5"])
def test_bad_thread_counts_are_named(spec):
    result = CliRunner().invoke(bench, ["--threads", spec])
    assert result.exit_code == 2 and "--threads: expected counts from 1 to" in result.output


def test_thread_counts_all_and_duplicates():
    top = len(os.sched_getaffinity(0))
    assert pinned.counts("1,all") == sorted({1, top}) and pinned.counts("all,1,all")[0] == top


def _without(module: str, code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python where importing ``module`` fails, as if not installed."""
    block = (
        "import sys\n"
        "class Absent:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] == {module!r}:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Absent())\n"
    )
    return subprocess.run(
        [sys.executable, "-c", block + code], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_without_torch_bench_names_the_peers_it_skipped_and_why():
    code = (
        "import sys; sys.argv = ['qkv', 'bench', '--quick', '--no-memory']\n"
        "from qkv.cli import main; main()"
    )
    done = _without("torch", code)
    assert done.returncode == 0, done.stderr
    for peer in TORCH_PEERS:
        assert f"skipped {peer}: torch is not installed (pip install 'qkv[torch]')" in done.stdout
    assert "torch not installed" in done.stdout  # the header says so too


def test_without_numba_the_fused_peer_is_skipped_and_auto_falls_back():
    code = (
        "from qkv.bench.peers import unavailable; print(unavailable(['qkv fused']))\n"
        "import numpy as np, qkv; x = np.ones((300, 300))\n"
        "from qkv.checks import problem; from qkv.kernels.dispatch import choose\n"
        "print(choose('auto', problem(x, x, x)))"
    )
    done = _without("numba", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "{'qkv fused': \"numba is not installed (pip install 'qkv[fast]')\"}",
        "blocked",
    ]


def test_without_transformers_the_model_bench_says_why():
    done = _without(
        "transformers",
        "from qkv.bench import hf_llama; print(hf_llama.missing()); "
        "print(hf_llama.missing(qkv_attention=True))",
    )
    assert done.stdout.splitlines() == ["transformers is not installed (pip install 'qkv[hf]')"] * 2


@pytest.mark.slow
def test_model_hf_quick_json_reports_every_peer():
    pytest.importorskip("qkv.models")
    args = ["--model", "smollm2-135m", "--hf", "--quick", "--json"]
    result = CliRunner().invoke(bench, args)
    if "not installed" in result.output:
        pytest.skip(result.output)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["prompt_tokens"] == 32 and report["new_tokens"] == 8
    peers = [r["peer"] for r in report["results"]]
    assert peers[:2] == ["qkv untraced", "qkv traced"]
    assert set(peers[2:]) | set(report["skipped_peers"]) == {
        "transformers sdpa",
        "transformers eager",
        "transformers + qkv",
        "transformers + qkv traced",
        "transformers eager + output_attentions",
    }
    for r in report["results"]:
        assert r["tokens"] == 8 and 0 < r["prefill_s"] < r["total_s"]
        assert r["decode_tokens_per_s"] > 0 and r["tokens_per_s"] > 0
        assert r["tokens_equal_untraced"] == 8, r  # same weights, same greedy tokens
    assert report["tokens_equal"] is True
    assert report["ratios"]["traced_time_over_untraced"] > 0
    if "transformers sdpa" in peers:
        assert report["ratios"]["untraced_tokens_per_s_over_sdpa"] > 0
    if "transformers + qkv" in peers:  # --hf: the two ratios
        assert report["ratios"]["hf_qkv_tokens_per_s_over_sdpa"] > 0
        assert report["ratios"]["hf_qkv_traced_tokens_per_s_over_eager_attentions"] > 0


def test_hf_needs_model():
    result = CliRunner().invoke(bench, ["--hf", "--quick"])
    assert result.exit_code == 2 and "--hf: expected it with --model" in result.output


def test_prompt_needs_model_and_fits_the_context():
    result = CliRunner().invoke(bench, ["--prompt", "4000", "--quick"])
    assert result.exit_code == 2 and "--prompt 4000: expected it with --model" in result.output
    pytest.importorskip("qkv.models")
    result = CliRunner().invoke(bench, ["--model", "smollm2-135m", "--prompt", "8190", "--quick"])
    if "not installed" in result.output:
        pytest.skip(result.output)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert (
        "--prompt 8190: a prompt of 8,190 tokens and 8 new tokens exceed smollm2-135m's context of "
        "8,192 tokens: the prompt may have at most 8,184 tokens" in result.output
    )


def test_a_long_benchmark_prompt_repeats_the_texts_tokens():
    from qkv import models
    from qkv.bench import generation

    try:
        model = models.load("smollm2-135m")
    except models.ModelNotInstalled as e:
        pytest.skip(str(e))
    text, _ = model.encode(generation.TEXT)
    assert generation.prompt_ids(model, 32) == text[:32]
    long = generation.prompt_ids(model, 3 * len(text) + 5)
    assert long == text + text + text + text[:5]


@pytest.mark.slow
def test_table_output_and_skipping_by_memory():
    args = [
        "--T",
        "64,96",
        "--heads",
        "1",
        "--d",
        "8",
        "--causal",
        "--min-time",
        "0",
        "--peers",
        "qkv blocked,naive numpy",
        "--max-memory",
        "0.00004",
        "--no-memory",
        "--gemm-size",
        "256",
        "--threads",
        "1",
    ]
    result = CliRunner().invoke(bench, args)
    assert result.exit_code == 0, result.output
    for label in ("T=64 h=1 d=8 full", "T=96 h=1 d=8 causal", "qkv blocked", "naive numpy"):
        assert label in result.output
    # naive numpy holds ~9 bytes per score: 96·96·9 > 0.00004 GiB (skipped), 64·64·9 is not
    assert result.output.count("skipped") == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["--T", "12,x"], "comma-separated integers"),
        (["--T", "0"], "positive sizes"),
        (["--skip-full"], "nothing to run"),
        (["--peers", "qkv blocked,jax"], "unknown peers"),
    ],
)
def test_bad_options_are_named(args, message):
    result = CliRunner().invoke(bench, args)
    assert result.exit_code == 2 and message in result.output


def test_a_fast_peer_whose_warm_up_paid_a_one_time_cost_is_timed_warm(monkeypatch):
    # the first call loads something (longer than RERUN); every later call is fast: its first
    # timed run, measured cold after the pause, is dropped, and each counted run follows an
    # untimed one, like the peers that were fast from the start. A clock of its own, so the
    # machine's load cannot change what is counted.
    from types import SimpleNamespace

    from qkv.bench import peers

    clock = [0.0]
    calls = []

    def loads_once():
        calls.append(1)
        clock[0] += peers.RERUN * (2 if len(calls) == 1 else 0.1)
        return len(calls)

    fake = SimpleNamespace(perf_counter=lambda: clock[0], sleep=lambda s: None)
    monkeypatch.setattr(peers, "time", fake)
    medians, _, bests = peers.time_peers({"p": loads_once}, min_time=0, max_repeats=3, settle=0)
    assert len(calls) == 1 + 1 + 3 * 2  # warm-up, the dropped cold run, 3 × (untimed, timed)
    assert medians["p"] == pytest.approx(peers.RERUN * 0.1)
    assert bests["p"] == pytest.approx(peers.RERUN * 0.1)


def test_error_reference_rows_match_a_full_float64_einsum():
    cfg = Config(T=40, heads=2, d=8, causal=True, decode=False)
    q, k, v = (a.astype(np.float64) for a in inputs(cfg))
    s = np.einsum("hld,hsd->hls", q, k) / np.sqrt(8)
    s[:, np.triu(np.ones((40, 40), bool), 1)] = -np.inf
    w = np.exp(s - s.max(-1, keepdims=True))
    full = np.einsum("hls,hsd->hld", w / w.sum(-1, keepdims=True), v)
    np.testing.assert_allclose(float64_reference(cfg, *inputs(cfg)), full, atol=1e-12)


def test_tune_with_tuning_off_shows_the_built_in_tiles():
    result = CliRunner().invoke(bench, ["--tune"])
    assert result.exit_code == 0, result.output
    assert "tuning off (QKV_TUNE=off)" in result.output
    assert f"= {tuning.DEFAULT} (default (QKV_TUNE=off))" in result.output.replace("\n", " ")
    if fused.available():  # the strip kernel's built-in rows are its own
        from qkv.kernels import strips_jit

        text = " ".join(result.output.split())
        rows = f"{strips_jit.STRIP_ROWS}×{strips_jit.STRIP_KEYS}"
        assert f"strips: block_q × block_k = {rows} (default (QKV_TUNE=off))" in text
        # the decoding choice in its own words: where it leaves its loop for BLAS
        assert "decode: BLAS from 512 keys (default (QKV_TUNE=off))" in text


def test_tune_measures_once_then_reads_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("QKV_TUNE", "on")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tuning, "PROBLEM", {"heads": 1, "T": 96, "d": 8})
    monkeypatch.setattr(tuning, "CANDIDATES", (tuning.Tiles(16, 32), tuning.DEFAULT))
    tuning.reset()
    try:
        first = json.loads(CliRunner().invoke(bench, ["--retune", "--json"]).stdout)
        tuning.forget()  # as a new process would: the file is read
        again = json.loads(CliRunner().invoke(bench, ["--tune", "--json"]).stdout)
    finally:
        tuning.reset()
    assert first["cache"] == str(tmp_path / "qkv" / "tiles.json")
    assert [k["source"] for k in first["kernels"]] == ["measured now"] * len(first["kernels"])
    assert [k["source"] for k in again["kernels"]] == ["cache"] * len(first["kernels"])
    assert [k["tiles"] for k in again["kernels"]] == [k["tiles"] for k in first["kernels"]]
    tuned = fused.tuned() if fused.available() else ()
    problems = {k["kernel"]: k["problem"] for k in first["kernels"]}
    assert problems["blocked"] == tuning.problem_text()
    if fused.available():  # the decoding choice is timed on decoding steps, and says so
        assert problems["decode"] == decode_blas.STEPS != problems["blocked"]
    for k in first["kernels"]:
        sizes = [(row["block_q"], row["block_k"]) for row in k["table"]]
        own = {t.name: t.candidates for t in tuned}.get(k["kernel"])
        want = [(t.block_q, t.block_k) for t in own] if own else [(16, 32), (256, 512)]
        assert sorted(sizes) == sorted(want)
        assert (k["tiles"]["block_q"], k["tiles"]["block_k"]) == sizes[0]  # the fastest
        assert k["table"][0]["cpu_s"] <= k["table"][1]["cpu_s"]
