"""``qkv bench`` as CI runs it: a --quick smoke run; no timing is asserted."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from qkv.cli.bench import bench
from qkv.bench.peers import PEERS, TORCH_PEERS, Config, float64_reference, inputs


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


def test_table_output_and_skipping_by_memory():
    args = ["--T", "64,96", "--heads", "1", "--d", "8", "--causal", "--min-time", "0",
            "--peers", "qkv blocked,naive numpy", "--max-memory", "0.00004", "--no-memory", "--gemm-size", "256"]
    result = CliRunner().invoke(bench, args)
    assert result.exit_code == 0, result.output
    for label in ("T=64 h=1 d=8 full", "T=96 h=1 d=8 causal", "qkv blocked", "naive numpy"):
        assert label in result.output
    # naive numpy holds ~9 bytes per score: 96·96·9 > 0.00004 GiB (skipped), 64·64·9 is not
    assert result.output.count("skipped") == 2


@pytest.mark.parametrize("args, message", [
    (["--T", "12,x"], "comma-separated integers"),
    (["--T", "0"], "positive sizes"),
    (["--skip-full"], "nothing to run"),
    (["--peers", "qkv blocked,jax"], "unknown peers"),
])
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
