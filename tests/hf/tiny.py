"""Tiny random transformers models (built from config classes, nothing downloaded), one per
architecture the "qkv" attention implementation must match eager attention on.

Test modules here import it first: without transformers (the ``hf`` extra) they skip, saying why.
"""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch", reason="qkv.hf needs torch (pip install 'qkv[hf]')")
transformers = pytest.importorskip(
    "transformers", reason="qkv.hf needs transformers (pip install 'qkv[hf]')"
)
import qkv.hf  # noqa: E402,F401  (registers attn_implementation="qkv")

VOCAB = 97
SMALL = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=37,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


def _configs():
    t = transformers
    return {
        "llama": lambda: t.LlamaConfig(**SMALL),
        "qwen2": lambda: t.Qwen2Config(
            **SMALL, use_sliding_window=True, sliding_window=3, max_window_layers=1
        ),
        "mistral": lambda: t.MistralConfig(**SMALL, sliding_window=3),
        "gemma": lambda: t.GemmaConfig(**SMALL, head_dim=8),
        "gemma2": lambda: t.Gemma2Config(
            **SMALL,
            head_dim=8,
            sliding_window=3,
            attn_logit_softcapping=2.0,
            query_pre_attn_scalar=11,
        ),
        "gemma3": lambda: t.Gemma3TextConfig(**SMALL, head_dim=8, sliding_window=3),
        "phi3": lambda: t.Phi3Config(**SMALL, pad_token_id=0, bos_token_id=1, eos_token_id=2),
        "gpt2": lambda: t.GPT2Config(
            vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64
        ),
        "gpt_oss": lambda: t.GptOssConfig(
            **SMALL, head_dim=8, sliding_window=3, num_local_experts=4, num_experts_per_tok=2
        ),
        "bert": lambda: t.BertConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=64,
        ),
        "t5": lambda: t.T5Config(
            vocab_size=VOCAB,
            d_model=32,
            d_kv=8,
            d_ff=37,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=4,
            relative_attention_num_buckets=8,
            decoder_start_token_id=0,
        ),
    }


CONFIGS = _configs()
CAUSAL = ("llama", "qwen2", "mistral", "gemma", "gemma2", "gemma3", "phi3", "gpt2", "gpt_oss")


def build(name: str, *, attn: str, dtype=torch.float32, seed: int = 0, config=None):
    """A tiny model of architecture ``name`` with seeded random weights (every parameter,
    sinks and biases included, drawn from N(0, 0.5²)) and attention ``attn``; ``config``
    overrides config fields."""
    overrides = config or {}
    config = CONFIGS[name]()
    for key, value in overrides.items():
        setattr(config, key, value)
    config._attn_implementation = attn
    if name == "bert":
        cls = transformers.AutoModelForMaskedLM
    elif name == "t5":
        cls = transformers.AutoModelForSeq2SeqLM
    else:
        cls = transformers.AutoModelForCausalLM
    torch.manual_seed(seed)
    extra = {"experts_implementation": "eager"} if name == "gpt_oss" else {}
    model = cls.from_config(config, attn_implementation=attn, dtype=dtype, **extra)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    return model.eval()


def padded_batch(*, left: bool = True):
    """Two sequences of 7 and 4 tokens, the shorter one padded on the left (or right)."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, 7), generator=gen)
    mask = torch.ones(2, 7, dtype=torch.long)
    if left:
        mask[1, :3] = 0
    else:
        mask[1, 4:] = 0
    ids = ids.masked_fill(mask == 0, 0)
    return {"input_ids": ids, "attention_mask": mask}


def run(model, name: str, batch):
    """Logits of ``model`` on ``batch`` (T5 decodes a fixed 5-token prefix)."""
    kwargs = dict(batch)
    if name == "t5":
        kwargs["decoder_input_ids"] = batch["input_ids"][:, :5]
    with torch.no_grad():
        return model(**kwargs).logits


def patched_by_hand(eager, layer: int, head: int, clean_ids, corrupted_ids, logits):
    """Activation patching done by hand on an eager Llama: ``logits(ids)`` of the clean run,
    the corrupted run, and the corrupted run with one head's z (its d_head columns of the
    input to ``o_proj``) taken from the clean run; (clean, corrupted, patched)."""
    attn = eager.model.layers[layer].self_attn
    part = slice(head * attn.head_dim, (head + 1) * attn.head_dim)
    clean = {}

    def keep(m, args, kwargs):
        clean["z"] = args[0].clone()

    def put(m, args, kwargs):
        z = args[0].clone()
        z[..., part] = clean["z"][..., part]
        return (z,), kwargs

    def with_hook(ids, hook):
        handle = attn.o_proj.register_forward_pre_hook(hook, with_kwargs=True) if hook else None
        try:
            return logits(ids)
        finally:
            if handle:
                handle.remove()

    return with_hook(clean_ids, keep), with_hook(corrupted_ids, None), with_hook(corrupted_ids, put)


@contextlib.contextmanager
def served_pair(root, serve):
    """A real server offering a tiny Llama and a tiny BERT saved under ``root`` (as
    ``qkv serve --model DIR`` would); yields (base url, the Llama's directory, the eager Llama)."""
    from qkv.hf.local import open_dir
    from qkv.web.app import create_app
    from qkv.web.models import ModelPool

    llama, bert = root / "tiny-llama", root / "tiny-bert"
    eager = save_local("llama", llama)
    save_local("bert", bert)
    pool = ModelPool(local={"tiny-llama": open_dir(llama), "tiny-bert": open_dir(bert)})
    with serve(create_app(model_pool=pool)) as url:
        yield url, llama, eager


@contextlib.contextmanager
def softmax_in_input_dtype():
    """Eager attention computes its softmax in float32 even for float64 inputs; for a float64
    reference, let softmax keep float64 inputs in float64."""
    original = torch.nn.functional.softmax

    def softmax(x, dim=None, *args, dtype=None, **kwargs):
        if x.dtype == torch.float64:
            dtype = None
        return original(x, dim, *args, dtype=dtype, **kwargs)

    torch.nn.functional.softmax = softmax
    try:
        yield
    finally:
        torch.nn.functional.softmax = original


def word_tokenizer(*, mark: str = ""):
    """A tokenizer over the tiny vocabulary: words "w0" … "w96" split on spaces. ``mark`` spells
    each word with a space before it as a subword vocabulary does: "Ġ" (byte-level BPE: the
    vocabulary holds "Ġw5" for " w5") or "▁" (SentencePiece)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {f"{mark}w{i}": i for i in range(VOCAB)}
    unk = f"{mark}w0"
    tok = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    if mark == "Ġ":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.WhitespaceSplit(),
                pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel()
    elif mark == "▁":
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
    else:
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=unk, pad_token=unk)


def save_local(name: str, path, *, safetensors: bool = True, config=None, mark: str = ""):
    """Save a tiny model of architecture ``name`` and ``word_tokenizer(mark=mark)`` as a local
    transformers directory; return the model (eager attention) the directory holds."""
    model = build(name, attn="eager", config=config)
    model.save_pretrained(path)
    if not safetensors:  # the pickle format transformers used to write
        for f in path.glob("*.safetensors"):
            f.unlink()
        torch.save(model.state_dict(), path / "pytorch_model.bin")
    word_tokenizer(mark=mark).save_pretrained(path)
    return model
