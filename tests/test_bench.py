"""``qkv bench`` as CI runs it: a --quick smoke run; no timing is asserted."""

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from qkv.bench.peers import PEERS, TORCH_PEERS, Config, float64_reference, inputs
from qkv.cli.bench import bench


def test_quick_json_reports_every_config_and_peer():
    result = CliRunner().invoke(bench, ["--quick", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["gemm"]["gflops"] > 0
    kinds = [(c["config"]["causal"], c["config"]["decode"]) for c in report["configs"]]
    assert kinds == [(False, False), (True, False), (False, True)]
    for entry in report["configs"]:
        assert "memory_error" not in entry
        peers = [row["peer"] for row in entry["results"]]
        assert peers == list(PEERS) or peers == [p for p in PEERS if p not in TORCH_PEERS]
        for row in entry["results"]:
            assert row["median_s"] > 0 and row["gflops"] > 0
            assert row["max_abs_err"] < 1e-5, row  # float32 against float64
            assert isinstance(row["peak_extra_bytes"], int) and row["peak_extra_bytes"] >= 0
            if entry["config"]["decode"]:  # memory speed against the copy bandwidth
                assert row["kv_gb_per_s"] > 0 and row["pct_copy"] > 0
                assert row["kv_gb_per_s"] == pytest.approx(
                    2 * 2 * 256 * 32 * 4 / row["median_s"] / 1e9
                )
    assert report["copy"]["gb_per_s"] > 0
    machine = report["machine"]  # the header's facts: BLAS, its kernel, threads
    blas = [lib for lib in machine["blas"] if lib["user_api"] == "blas"]
    assert blas and all(lib["num_threads"] >= 1 and "architecture" in lib for lib in blas)
    assert "OPENBLAS_CORETYPE" in machine["env"]


def test_table_header_names_blas_kernel_and_threads():
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
    ]
    result = CliRunner().invoke(bench, args)
    assert result.exit_code == 0, result.output
    assert "blas: " in result.output and " threads (" in result.output
    assert "copy bandwidth" in result.output and "K,V GB/s" in result.output


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


def test_error_reference_rows_match_a_full_float64_einsum():
    cfg = Config(T=40, heads=2, d=8, causal=True, decode=False)
    q, k, v = (a.astype(np.float64) for a in inputs(cfg))
    s = np.einsum("hld,hsd->hls", q, k) / np.sqrt(8)
    s[:, np.triu(np.ones((40, 40), bool), 1)] = -np.inf
    w = np.exp(s - s.max(-1, keepdims=True))
    full = np.einsum("hls,hsd->hld", w / w.sum(-1, keepdims=True), v)
    np.testing.assert_allclose(float64_reference(cfg, *inputs(cfg)), full, atol=1e-12)
