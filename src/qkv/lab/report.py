"""What ``qkv lab train`` reports: accuracy, the agreement head, and the effect of ÷√d_k and τ."""

from __future__ import annotations

import numpy as np

from qkv.lab import corpus, minigpt
from qkv.lab.result import Result

CLAIM = ("a head of the Mini-GPT learns to look from the verb slot back to the subject, and the "
         "model picks the verb form after he/she/it")
EXAMPLE = "<bos> I work , you work , she often really works"


def training_result(meta: dict, runs: dict, checkpoint: str) -> Result:
    head = meta["agreement_head"]
    rows = [["held-out accuracy after he/she/it", meta["accuracy_third_singular"]],
            ["held-out accuracy, every subject", meta["accuracy_all_subjects"]],
            ["untrained model, after he/she/it", meta["untrained_accuracy"]],
            [f"layer {head['layer']} head {head['head']}: mean weight on the subject",
             head["mean_weight_on_subject"]],
            ["training seconds", meta["seconds"]]]
    for name, run in runs.items():
        first = float(np.mean(run.grad_norms[:20]))
        rows.append([f"{name}: mean ‖grad‖, first 20 steps", first])
        for s in sorted({len(run.losses) // 4, len(run.losses) // 2, len(run.losses) - 1}):
            rows.append([f"{name}: loss at step {s + 1}", float(np.mean(run.losses[max(0, s - 9):s + 1]))])
    supported = meta["accuracy_third_singular"] >= 0.95 and head["mean_weight_on_subject"] > 0.3
    evidence = (f"accuracy {meta['accuracy_third_singular']:.3f} on {meta['verbs_evaluated']} "
                f"held-out verbs (untrained {meta['untrained_accuracy']:.2f}); layer "
                f"{head['layer']} head {head['head']} puts {head['mean_weight_on_subject']:.2f} on "
                f"the subject; checkpoint {checkpoint}")
    if len(runs) > 1:
        (base_name, base), *others = runs.items()
        g0, l0 = np.mean(base.grad_norms[:20]), np.mean(base.losses[-10:])
        evidence += "; against " + base_name + ": " + ", ".join(
            f"{name} moves the first steps' ‖grad‖ by {np.mean(r.grad_norms[:20]) / g0 - 1:+.1%} "
            f"and the final loss by {np.mean(r.losses[-10:]) - l0:+.3f}"
            for name, r in others)
    return Result("train", CLAIM, ["measure", "value"], rows, supported, evidence)


def trace_text(checkpoint: str, text: str, layer: int = 0, *, scale=None,
               temperature: float = 1.0):
    """The trace of one layer's attention for a sentence (words from the Mini-GPT's vocabulary).
    A leading <bos> is added when missing; ``___`` stands for the slot being predicted and is
    dropped (the last word then makes the prediction)."""
    params, config, _ = minigpt.load(checkpoint)
    words = text.split()
    if words and words[-1] == "___":
        words = words[:-1]
    if not words or words[0] != "<bos>":
        words = ["<bos>", *words]
    if not 0 <= layer < config.n_layers:
        raise ValueError(f"layer must be in [0, {config.n_layers}), got {layer}")
    ids = np.array(corpus.encode(words))  # (T,)
    _, traces = minigpt.forward(params, ids, config, scale=scale, temperature=temperature,
                                return_traces=True)
    tr = traces[layer]
    tr.tokens = words
    return tr


def agreement_png(checkpoint: str, path: str) -> None:
    from qkv.explain.heatmap import weights_png

    _, _, meta = minigpt.load(checkpoint)
    head = meta["agreement_head"]
    words = EXAMPLE.split()
    tr = trace_text(checkpoint, " ".join(words[:-1]), head["layer"])
    weights_png(tr, path, query=len(words) - 2, head=head["head"],
                title=f"Mini-GPT layer {head['layer']}: verb slot → subject")
