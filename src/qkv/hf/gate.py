"""The one check a model directory passes before transformers builds anything from it.

It reads ``config.json`` and the weights' headers, never the weights:

- a safetensors file is 8 bytes (little-endian n), n bytes of JSON naming each tensor's dtype,
  shape and byte range ``data_offsets = [begin, end)`` in the data that follows, then the data.
  The header must lie inside the file, and every tensor's range inside the data and as long as
  its dtype and shape need (a truncated download fails here, not in the loader);
- the sizes ``config.json`` gives imply a least number of parameters, which the weights present
  must hold:

      vocab_size·embedding_size  +  layers·(attention + MLP)  +  experts  +  positions
      attention = hidden_size·head_dim·2·(num_attention_heads + num_key_value_heads)
      MLP       = 2·hidden_size·intermediate_size
      experts   = num_experts·hidden_size·(moe_intermediate_size + 1)
      positions = max_position_embeddings·embedding_size, where the weights hold a table

  (W_Q and W_O, W_K and W_V, two MLP matrices; a mixture of experts has, in at least one layer,
  a router row and at least one matrix per expert: which layers are sparse differs from one
  architecture to the next, so one layer is what is sure; a learned position table, GPT-2's
  ``wpe``, BERT's ``position_embeddings``, has a row per position). ``embedding_size`` is
  ``hidden_size`` unless the config narrows it (ALBERT, ELECTRA); ``layers`` is
  ``num_hidden_layers``, or the layers stored where they are shared (ALBERT's groups);
  ``num_experts`` is what the config calls num_local_experts, num_experts, n_routed_experts or
  moe_num_experts, ``moe_intermediate_size`` is ``intermediate_size`` where it gives none. A
  size the config does not give adds nothing; tied heads, biases, norms, fused projections and
  the experts of other layers only add to the count. Pickle weights (``--allow-pickle``) have
  no header to read without unpickling: there the bound is one byte per parameter, and a
  position table is not looked for.

Rotary and relative positions have no table: there ``max_position_embeddings`` is only bounded
by MAX_POSITIONS. A config that asks for more than its weights hold (a million layers over a
file of two, a hidden size of 10⁹, a million experts, ten million positions over a table of
64) is refused with a ValueError naming both numbers, before any model object exists.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

MAX_CONFIG_BYTES = 4 * 2**20  # config.json files are a few KB; a label map can take more
MAX_HEADER_BYTES = 100_000_000  # what the safetensors library itself reads at most
MAX_POSITIONS = 2**24  # 16,777,216: max_position_embeddings past this is refused
BITS = {  # safetensors dtypes
    **dict.fromkeys(("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0"), 8),
    **dict.fromkeys(("U16", "I16", "F16", "BF16"), 16),
    **dict.fromkeys(("U32", "I32", "F32"), 32),
    **dict.fromkeys(("U64", "I64", "F64", "C64"), 64),
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}
# the sizes read from config.json, by their names in transformers' configs (attribute_map
# translates GPT-2's n_layer, T5's d_model, ...)
SIZES = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "intermediate_size",
    "embedding_size",  # ALBERT, ELECTRA: token embeddings narrower than hidden_size
    "num_hidden_groups",  # ALBERT: layers stored, shared by the num_hidden_layers that run
    "inner_group_num",
    "max_position_embeddings",
    "moe_intermediate_size",  # an expert's MLP width, where it differs from intermediate_size
)
# what configs call the number of experts of a mixture-of-experts layer
EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
# the names a learned position table (one row per position) ends with: BERT and its kin, GPT-2,
# OPT and BART
POSITION_TABLES = ("position_embeddings.weight", "wpe.weight", "embed_positions.weight")


def check(path) -> None:
    """Refuse (ValueError) the model directory ``path`` unless its config.json and the headers
    of its weights are well-formed and its weights hold what config.json implies."""
    path = Path(path)
    sizes = config_sizes(read_config(path / "config.json"))
    positions = sizes["max_position_embeddings"]
    if positions is not None and positions > MAX_POSITIONS:
        raise ValueError(
            f"{path}: config.json asks for max_position_embeddings {positions:,}; at most "
            f"{MAX_POSITIONS:,} are read; refused before building the model"
        )
    files = sorted(path.glob("*.safetensors"))
    table = False
    if files:
        tensors = [safetensors_tensors(f) for f in files]
        present = sum(math.prod(shape) for t in tensors for shape in t.values())
        table = any(
            n.endswith(POSITION_TABLES) and len(s) == 2 for t in tensors for n, s in t.items()
        )
        held = f"the weights hold {present:,} ({', '.join(f.name for f in files)})"
    else:  # pickle: at most one parameter per byte
        files = sorted(path.glob("*.bin"))
        if not files:
            raise ValueError(f"{path} holds no weights: no *.safetensors nor *.bin file")
        present = sum(f.stat().st_size for f in files)
        held = f"the pickle weights are {present:,} bytes ({', '.join(f.name for f in files)})"
    implied = implied_parameters(sizes, position_table=table)
    if implied > present:
        given = ", ".join(f"{k} {v:,}" for k, v in sizes.items() if v is not None)
        raise ValueError(
            f"{path}: config.json ({given}) implies at least {implied:,} parameters, but "
            f"{held}; refused before building the model"
        )


def read_config(file: Path) -> dict:
    """config.json as a dict, read only when it is of a config's size."""
    size = file.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ValueError(
            f"{file} is {size:,} bytes; a config.json is at most {MAX_CONFIG_BYTES:,} bytes"
        )
    try:
        config = json.loads(file.read_bytes())
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{file} is not JSON: {str(e)[:200]}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{file} must hold a JSON object, got {type(config).__name__}")
    return config


def config_sizes(config: dict) -> dict[str, int | None]:
    """The SIZES config.json gives (a default of its model type where it gives none; None where
    neither says), each checked to be a whole number ≥ 0. A multimodal config's sizes are its
    ``text_config``'s."""
    import transformers

    model_type = config.get("model_type")
    known = transformers.CONFIG_MAPPING  # a lazy mapping: `in` and [] only
    cls = known[model_type] if isinstance(model_type, str) and model_type in known else None
    if cls is None:
        raise ValueError(
            f"config.json names model_type {str(model_type)[:64]!r}, not one transformers "
            f"knows; qkv runs no code from a checkpoint"
        )
    names = getattr(cls, "attribute_map", {})
    defaults = {
        k: p.default
        for k, p in inspect.signature(cls.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    sizes = {}
    for size in SIZES:
        key = names.get(size, size)
        sizes[size] = _whole(key, config.get(key, defaults.get(key)))
    experts = [names.get(e, e) for e in EXPERTS]
    given = [_whole(key, config.get(key, defaults.get(key))) for key in experts]
    sizes["num_experts"] = max((n for n in given if n is not None), default=None)
    text = config.get("text_config")
    if sizes["hidden_size"] is None and isinstance(text, dict):
        sub = getattr(cls, "sub_configs", {}).get("text_config")
        sub_type = getattr(sub, "model_type", None)
        return config_sizes({"model_type": sub_type, **text})
    return sizes


def _whole(key: str, value):
    """A size as config.json gives it: None, a whole number ≥ 0, or (a width per layer) a list
    of them, whose least is taken."""
    if isinstance(value, list) and value:
        return min(_whole(key, v) or 0 for v in value)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"config.json: {key} must be a whole number ≥ 0, got {repr(value)[:100]}")
    return value


def implied_parameters(sizes: dict[str, int | None], *, position_table: bool = False) -> int:
    """The fewest parameters a transformer with these sizes holds (the module docstring's sum;
    ``position_table``: the weights hold a learned one); a size config.json does not give adds
    nothing."""
    d = sizes["hidden_size"] or 0
    heads = sizes["num_attention_heads"] or 0
    kv_heads = sizes["num_key_value_heads"] or heads
    d_head = sizes["head_dim"] or (d // heads if heads else 0)
    attention = d * d_head * 2 * (heads + kv_heads)  # W_Q, W_O; W_K, W_V
    mlp = 2 * d * (sizes["intermediate_size"] or 0)
    layers = sizes["num_hidden_layers"] or 0
    if sizes["num_hidden_groups"] is not None:  # shared layers: stored once per group
        layers = min(layers, sizes["num_hidden_groups"] * (sizes["inner_group_num"] or 1))
    embedding = sizes["embedding_size"] or d
    width = sizes.get("moe_intermediate_size") or sizes["intermediate_size"] or 0
    experts = (sizes.get("num_experts") or 0) * d * (width + 1)  # in one layer at least
    positions = (sizes.get("max_position_embeddings") or 0) * embedding if position_table else 0
    return (sizes["vocab_size"] or 0) * embedding + layers * (attention + mlp) + experts + positions


def safetensors_parameters(file: Path) -> int:
    """The number of parameters a safetensors file holds (``safetensors_tensors``)."""
    return sum(math.prod(shape) for shape in safetensors_tensors(file).values())


def safetensors_tensors(file: Path) -> dict[str, list[int]]:
    """{tensor name: shape} of a safetensors file, read from its header, which must describe
    the file: ValueError naming the file, the tensor and the byte counts otherwise."""
    size = file.stat().st_size
    with file.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(
                f"{file} is {size} bytes, too short for a safetensors header (8 bytes of "
                f"length, then the JSON header)"
            )
        n = int.from_bytes(head, "little")
        if n > MAX_HEADER_BYTES or 8 + n > size:
            raise ValueError(
                f"{file}: its header says it is {n:,} bytes long, but the file holds "
                f"{size - 8:,} bytes after the length (at most {MAX_HEADER_BYTES:,} are read); "
                f"the file is truncated or not safetensors"
            )
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{file}: its header is not JSON ({str(e)[:200]})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{file}: its header must be a JSON object")
    data = size - 8 - n
    return {
        str(name): _tensor_shape(str(file), str(name)[:200], entry, data)
        for name, entry in header.items()
        if name != "__metadata__"
    }


def _tensor_shape(file: str, name: str, entry, data: int) -> list[int]:
    """The shape of one header entry, checked against its byte range and the data."""
    try:
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        bits = BITS[dtype]
        if not all(type(x) is int and x >= 0 for x in (*shape, begin, end)):
            raise TypeError
    except (TypeError, KeyError, ValueError):
        raise ValueError(
            f"{file}: tensor {name!r} must have a dtype of {sorted(BITS)}, a shape of whole "
            f"numbers and data_offsets [begin, end], got {str(entry)[:200]}"
        ) from None
    count = math.prod(shape)
    need = (count * bits + 7) // 8
    if end > data:
        raise ValueError(
            f"{file}: tensor {name!r} ends at byte {end:,} of the data, but the file holds "
            f"{data:,} bytes of data; the file is truncated"
        )
    if end - begin != need:
        raise ValueError(
            f"{file}: tensor {name!r} ({dtype} {list(shape)}) needs {need:,} bytes, its "
            f"data_offsets [{begin:,}, {end:,}) give {end - begin:,}"
        )
    return list(shape)
