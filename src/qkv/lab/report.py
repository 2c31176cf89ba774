"""What ``qkv lab train`` reports: held-out agreement accuracy against baselines, the split's
disjointness, per-head attention and ablation, and the effect of ÷√d_k and τ."""

from __future__ import annotations

import numpy as np

from qkv.lab import corpus, minigpt
from qkv.lab.result import Result

CLAIM = (
    "the Mini-GPT takes the verb's number from its subject, past nouns of the opposite "
    "number, on (subject, verb) pairs it never trained on (≥ 0.90), and attention does "
    "the work (the no-attention model cannot)"
)
KEY = "≥1 opposite-number attractor"
EXAMPLES = (
    "the key to the cabinets is",
    "the dogs near the car that the man holds are",
    "the old box behind the tables with the books was",
    "the children that the woman sees near the key sleep",
)


def _interval(g: dict) -> str:
    return f"[{g['low']:.3f}, {g['high']:.3f}]"


def training_result(meta: dict, runs: dict, checkpoint: str) -> Result:
    """The table: one row per group of held-out sentences, the model and each baseline."""
    acc, base = meta["accuracy"], meta["baselines"]
    columns = [
        "held-out sentences",
        "n",
        "Mini-GPT",
        "95% interval",
        "no attention",
        "nearest noun",
        "untrained",
    ]
    rows = [
        [
            name,
            g["n"],
            g["accuracy"],
            _interval(g),
            base["no_attention"][name]["accuracy"],
            base["nearest_noun"][name]["accuracy"],
            base["untrained"][name]["accuracy"],
        ]
        for name, g in acc.items()
    ]
    for name, run in runs.items():
        rows.append(
            [
                f"{name}: mean ‖grad‖, first 20 steps",
                "",
                float(np.mean(run.grad_norms[:20])),
                "",
                "",
                "",
                "",
            ]
        )
        rows.append(
            [f"{name}: loss, last 10 steps", "", float(np.mean(run.losses[-10:])), "", "", "", ""]
        )
    g, none = acc[KEY], base["no_attention"][KEY]
    supported = g["accuracy"] >= 0.90 and none["high"] < g["low"]
    top, costly = (
        next(
            r
            for r in meta["ablation"]
            if (r["layer"], r["head"]) == (meta[k]["layer"], meta[k]["head"])
        )
        for k in ("top_head", "largest_drop_head")
    )
    split, joint = meta["split"], meta["subject_heads"]
    evidence = (
        f"{g['correct']}/{g['n']} = {g['accuracy']:.3f} {_interval(g)} with ≥ 1 "
        f"opposite-number attractor, no-attention model {none['accuracy']:.3f} "
        f"{_interval(none)}, nearest noun {base['nearest_noun'][KEY]['accuracy']:.3f}; "
        f"{split['train_sentences']} training sentences, "
        f"{split['training_clauses_with_held_out_pair']} clauses with a held-out pair; "
        f"head {top['layer']}.{top['head']} looks from the verb slot at the subject "
        f"({top['weight_on_subject']:.2f}) over the attractors "
        f"({top['weight_on_attractors']:.2f}) and ablating it costs "
        f"{top['zero_drop']:+.3f} (zero) / {top['mean_drop']:+.3f} (mean); the costliest "
        f"ablation is head {costly['layer']}.{costly['head']}'s, "
        f"{costly['zero_drop']:+.3f} / {costly['mean_drop']:+.3f}; the heads that weight "
        f"the subject over the attractors ({', '.join(joint['heads'])}) ablated together "
        f"cost {joint['zero_drop']:+.3f} / {joint['mean_drop']:+.3f}; "
        f"checkpoint {checkpoint}"
    )
    return Result("train", CLAIM, columns, rows, bool(supported), evidence)


def ablation_table(meta: dict) -> tuple[list[str], list[list]]:
    """Per head: weight from the verb's query to subject and attractors, accuracy drops."""
    columns = [
        "head",
        "w on subject",
        "w on attractors",
        "zeroed: accuracy",
        "drop",
        "mean-ablated: accuracy",
        "drop",
    ]
    rows = [
        [
            f"{r['layer']}.{r['head']}",
            r["weight_on_subject"],
            r["weight_on_attractors"],
            r["zero_ablated_accuracy"],
            r["zero_drop"],
            r["mean_ablated_accuracy"],
            r["mean_drop"],
        ]
        for r in meta["ablation"]
    ]
    return columns, rows


def words_of(text: str) -> list[str]:
    """A sentence's words with a leading <bos>; ``___`` (the slot being predicted) is dropped,
    so the last word makes the prediction."""
    words = text.split()
    if words and words[-1] == "___":
        words = words[:-1]
    if not words or words[0] != "<bos>":
        words = ["<bos>", *words]
    return words


def trace_text(checkpoint: str, text: str, layer: int = 0, *, scale=None, temperature: float = 1.0):
    """The trace of one layer's attention for a sentence (words from the Mini-GPT's vocabulary,
    see ``words_of``)."""
    params, config, _ = minigpt.load(checkpoint)
    words = words_of(text)
    if not 0 <= layer < config.n_layers:
        raise ValueError(f"layer must be in [0, {config.n_layers}), got {layer}")
    ids = np.array(corpus.encode(words))  # (T,)
    _, traces = minigpt.forward(
        params, ids, config, scale=scale, temperature=temperature, return_traces=True
    )
    tr = traces[layer]
    tr.tokens = words
    return tr


def agreement_png(checkpoint: str, path: str) -> None:
    """The top head's weights from the verb's query on a few attractor sentences: the subject
    in green, attractors in red."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    params, config, meta = minigpt.load(checkpoint)
    layer, head = meta["top_head"]["layer"], meta["top_head"]["head"]
    fig = Figure(figsize=(10, 2.2 * len(EXAMPLES)), dpi=100)
    FigureCanvasAgg(fig)
    for ax, text in zip(fig.subplots(len(EXAMPLES), 1), EXAMPLES, strict=False):
        s = corpus.parse(["<bos>", *text.split()])
        _, traces = minigpt.forward(
            params, np.array([corpus.encode(s.words)]), config, return_traces=True
        )
        w = np.asarray(traces[layer].weights)[0, head, s.verb - 1, : s.verb]  # (verb,)
        colours = [
            "tab:green" if i == s.subject else "tab:red" if i in s.attractors else "tab:gray"
            for i in range(s.verb)
        ]
        ax.bar(range(s.verb), w, color=colours)
        ax.set_xticks(range(s.verb), s.words[: s.verb], fontsize=9)
        for i, (tick, colour) in enumerate(zip(ax.get_xticklabels(), colours, strict=False)):
            if colour != "tab:gray":  # mark the subject and attractors even at weight ≈ 0
                tick.set_color(colour)
                tick.set_fontweight("bold")
                ax.axvspan(i - 0.45, i + 0.45, color=colour, alpha=0.12)
        ax.set_ylim(0, 1)
        ax.set_ylabel("weight")
        ax.set_title(
            f"query '{s.words[s.verb - 1]}' predicts '{s.words[s.verb]}'; subject "
            "green, attractors red",
            fontsize=9,
        )
    fig.suptitle(
        f"Mini-GPT layer {layer} head {head}: the verb slot's weight on the subject "
        "over the attractors"
    )
    fig.tight_layout()
    fig.savefig(path)
