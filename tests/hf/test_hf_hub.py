"""A hub id (owner/name) as --model: found in the local Hugging Face cache without the network,
refused in one line when it is neither cached nor reachable. The cache is a real one laid out
as huggingface_hub writes it (refs/main -> snapshots/<commit>/), holding a tiny Llama."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from tiny import save_local

from qkv.cli import main  # noqa: E402
from qkv.trace import Trace  # noqa: E402

torch = pytest.importorskip("torch")
hub = pytest.importorskip("huggingface_hub")
REPO = "qkv-tests/tiny-llama"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
TEXT = "w5 w17 w33 w5"
IDS = [5, 17, 33, 5]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf-cache")
    repo = root / ("models--" + REPO.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    model = save_local("llama", snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([IDS]), output_attentions=True)
    return root, np.stack([a[0].numpy() for a in out.attentions])  # (n_layers, n_heads, L, L)


@pytest.fixture
def offline(monkeypatch, cache):
    monkeypatch.setattr(hub.constants, "HF_HUB_CACHE", str(cache[0]))
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", True)
    return cache


def invoke(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def test_a_cached_hub_id_explains_with_eagers_weights(offline):
    result = invoke(
        "explain", "--model", REPO, "--text", TEXT, "--layer", 1, "--head", 2, "--format", "json"
    )
    assert result.exit_code == 0, result.output
    trace = Trace.from_json(result.stdout)
    assert trace.tokens == [f"w{i}" for i in IDS]
    np.testing.assert_allclose(trace["weights"][2], offline[1][1, 2], atol=1e-6)


def test_a_hub_model_is_named_by_its_id():
    from qkv.hf import loading

    assert loading.display_name(REPO) == REPO


def test_an_id_missing_from_the_cache_while_offline_is_one_line(offline):
    result = invoke("heads", "--model", "qkv-tests/absent", "--text", TEXT)
    assert result.exit_code == 2, result.output
    assert (
        "'qkv-tests/absent' is not a local directory nor in the Hugging Face cache, and "
        "HF_HUB_OFFLINE is set" in result.output
    )
    assert len(result.output.strip().splitlines()) == 1


def test_an_unreachable_hub_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub.constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens
    result = invoke("patch", "--model", "qkv-tests/absent", "--text", TEXT, "--ablate", "0.0")
    assert result.exit_code == 2, result.output
    assert (
        "'qkv-tests/absent' is not a local directory, and fetching it from the hub failed"
        in result.output
    )
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("spec", ["no-slash-model", "a/b/c", "../up/one"])
def test_a_spec_that_is_no_name_directory_or_id_says_what_is_expected(offline, spec):
    result = invoke("explain", "--model", spec, "--text", TEXT)
    assert result.exit_code == 2, result.output
    assert f"unknown model {spec!r}; choose one of" in result.output
    assert "or a hub id (owner/name)" in result.output
