"""`qkv explain --model DIR` and `qkv heads --model DIR` on a local transformers directory (a tiny
Llama saved to disk): the weights they show equal transformers eager's output_attentions, and a
directory they cannot load safely gets one line and exit 2."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from tiny import save_local

from qkv.cli import main  # noqa: E402
from qkv.models import patterns  # noqa: E402
from qkv.trace import Trace  # noqa: E402

torch = pytest.importorskip("torch")
TEXT = "w5 w17 w33 w5 w17"
IDS = [5, 17, 33, 5, 17]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama")
    model = save_local("llama", path)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([IDS]), output_attentions=True)
    eager = np.stack([a[0].numpy() for a in out.attentions])  # (n_layers, n_heads, L, L)
    return path, eager


def invoke(*args):
    return CliRunner().invoke(main, [*map(str, args)])


@pytest.mark.parametrize("layer, head", [(0, 1), (1, 2)])
def test_explain_shows_eagers_weights_for_the_layer_and_head(local, layer, head):
    path, eager = local
    result = invoke(
        "explain",
        "--model",
        path,
        "--text",
        TEXT,
        "--layer",
        layer,
        "--head",
        head,
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    trace = Trace.from_json(result.stdout)
    assert trace.tokens == [f"w{i}" for i in IDS]
    np.testing.assert_allclose(trace["weights"][head], eager[layer, head], atol=1e-6)


def test_explain_walks_through_the_selected_head(local):
    result = invoke(
        "explain",
        "--model",
        local[0],
        "--text",
        TEXT,
        "--layer",
        1,
        "--head",
        3,
        "--select",
        "w33",
        "--format",
        "plain",
    )
    assert result.exit_code == 0, result.output
    assert f"{local[0].name}: layer 1, head 3" in result.output
    assert "query: w33 (position 2)" in result.output


def test_heads_grid_names_eagers_patterns(local):
    path, eager = local
    result = invoke("heads", "--model", path, "--text", TEXT)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line.strip()[:1].isdigit()]
    expected = patterns.grid(eager)
    assert len(rows) == len(expected) == 2
    for row, want in zip(rows, expected, strict=False):
        assert row[1::2] == [name for name, _ in want]
        assert [float(w.replace("1.0", "1")) for w in row[2::2]] == pytest.approx(
            [w for _, w in want], abs=0.006
        )


@pytest.mark.parametrize("command", ["explain", "heads"])
def test_pickle_weights_need_the_explicit_flag(tmp_path, command):
    save_local("llama", tmp_path, safetensors=False)
    result = invoke(command, "--model", tmp_path, "--text", TEXT)
    assert result.exit_code == 2 and "--allow-pickle" in result.output
    assert "Traceback" not in result.output
    result = invoke(command, "--model", tmp_path, "--text", TEXT, "--allow-pickle")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", ["explain", "heads"])
def test_a_directory_without_config_json_is_one_line(tmp_path, command):
    result = invoke(command, "--model", tmp_path, "--text", TEXT)
    assert result.exit_code == 2, result.output
    assert "directory holding config.json" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--layer", 2], "--layer must be in [0, 2)"),
        (["--head", 4], "--head must be in [0, 4)"),
        (["--select", "w99"], "--select"),
    ],
)
def test_explain_out_of_range_is_one_line(local, args, message):
    result = invoke("explain", "--model", local[0], "--text", TEXT, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("command", ["explain", "heads", "serve"])
def test_without_transformers_a_directory_names_the_extra(tmp_path, command):
    import subprocess
    import sys

    code = (
        "import sys\n"  # an import finder that answers as Python does for a missing package
        "class Absent:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'transformers':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Absent())\n"
        "from qkv.cli import main\nmain(sys.argv[1:], prog_name='qkv')\n"
    )
    args = [command, "--model", str(tmp_path)] + (["--text", TEXT] if command != "serve" else [])
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"Error: --model {tmp_path}: qkv.hf needs the Python package 'transformers', which is "
        "not installed: pip install 'qkv[hf]'"
    ]


def test_heads_taxonomy_on_a_directory_scores_eagers_weights(local):
    import transformers

    from qkv.hf import taxonomy

    path = local[0]
    result = invoke("heads", "--model", path, "--taxonomy")
    assert result.exit_code == 0, result.output
    # the same sequences measure() draws (seed 0, 4 × 2·20 tokens), through eager attention
    ids = taxonomy.repeated_random_tokens(4, 20, low=3, high=97, rng=np.random.default_rng(0))
    eager = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    with torch.no_grad():
        out = eager.eval()(input_ids=torch.as_tensor(ids), output_attentions=True)
    weights = np.stack([a.numpy() for a in out.attentions], axis=1)  # (B, n_layers, H, L, L)
    s = taxonomy.scores(weights, 20, sequences=4)
    for kind in ("previous", "induction"):
        top = ", ".join(f"{layer}.{h} ({score:.2f})" for layer, h, score in s.top(kind, 3))
        assert f"top {kind}{'-token' if kind == 'previous' else ''} heads: {top}" in result.output


@pytest.mark.parametrize("command", ["explain", "heads", "patch"])
def test_a_model_that_fails_on_a_text_is_one_line(tmp_path, command):
    from tiny import save_local

    save_local("gpt_oss", tmp_path)  # 37-float expert rows: transformers' grouped kernel may refuse
    extra = ["--ablate", "0.0"] if command == "patch" else []
    result = invoke(command, "--model", tmp_path, "--text", TEXT, *extra)
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:  # (stderr may also hold transformers' loading bar)
        errors = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
        assert len(errors) == 1 and "could not run this text: RuntimeError" in errors[0]
        assert "Traceback" not in result.output
