"""The walkthrough's softmax section: a row's scores scaled, tempered, soft-capped, biased and
masked, then turned into weights (with a sink's share when the trace has one), every number
shown in one table.
"""

from __future__ import annotations

import math

import numpy as np

from qkv.explain.format import Block, Formula, Table, section
from qkv.explain.numbers import fmt, rounded_sum
from qkv.steps import entropy


def tau_text(tau: float) -> str:
    """τ with three decimals, or three significant digits when it is tiny or huge."""
    return fmt(tau, 3) if 1e-3 <= tau < 1e6 else f"{tau:.3g}"


def is_default_scale(s) -> bool:
    return bool(s["d_k"]) and math.isclose(s["scale"], 1 / math.sqrt(s["d_k"]))


def softmax_section(trace, i, rows, cols, pick, mask_row, head):
    s = trace.settings
    me = rows[i]
    d_k, factor_, tau = s["d_k"], s["scale"], s["temperature"]
    row = {
        name: pick(trace[name])[i]
        for name in ("scores", "scaled", "tempered", "capped", "biased", "masked", "weights")
        if name in trace
    }
    masked, w = row["masked"], row["weights"]
    S = w.shape[0]
    blocks: list[Block] = []
    if is_default_scale(s):
        blocks.append(
            Formula(f"scaled = score ÷ √d_k = score ÷ √{d_k} = score ÷ {fmt(math.sqrt(d_k), 3)}")
        )
    elif factor_ == 1:
        blocks.append(Formula("scaled = score (scaling is off: the factor is 1, not 1/√d_k)"))
    else:
        blocks.append(
            Formula(f"scaled = score × {fmt(factor_, 4)} (a chosen factor in place of 1/√d_k)")
        )
    blocks.append(
        Formula(
            f"tempered = scaled ÷ τ = scaled ÷ {tau_text(tau)}"
            + (
                " (τ = 1 changes nothing)"
                if tau == 1
                else " (τ < 1 sharpens the weights)"
                if tau < 1
                else " (τ > 1 flattens the weights)"
            )
        )
    )
    blocks += _optional_steps(row, s)
    hidden = [cols[j] for j in range(S) if not mask_row[j]]
    before = "biased" if "biased" in row else "capped" if "capped" in row else "tempered"
    if not hidden:
        blocks.append(f"masked = {before}: nothing is masked")
    elif s.get("causal"):
        blocks.append(
            f"masked: {', '.join(hidden)} set to -inf (causal, {s['causal']}: a "
            f"query may not look at keys after its own position)"
        )
    else:
        blocks.append(f"masked: {', '.join(hidden)} set to -inf (the mask hides them)")
    live = bool(mask_row.any())
    sink = _sink(trace, pick, i, head)  # (logit or None, weight) when the trace has a sink
    tops = ([float(np.max(masked[mask_row]))] if live else []) + (
        [sink[0]] if sink and sink[0] is not None else []
    )
    top = max(tops, default=0.0)
    e = np.where(mask_row, np.exp(np.where(mask_row, masked, top) - top), 0.0)
    names = [n for n in ("scores", "scaled", "tempered", "capped") if n in row]
    head = ["key", *("score" if n == "scores" else n for n in names)]
    if "biased" in row:
        head += ["bias", "biased"]
    head += ["masked", "e^(m−max)", "weight"]
    body = [
        (
            cols[j],
            *(fmt(row[n][j]) for n in names),
            *(
                (fmt(row["biased"][j] - row[names[-1]][j]), fmt(row["biased"][j]))
                if "biased" in row
                else ()
            ),
            fmt(masked[j]),
            fmt(e[j], 3),
            fmt(w[j], 3),
        )
        for j in range(S)
    ]
    e_sink = None
    if sink:
        logit, weight = sink
        e_sink = None if logit is None else math.exp(logit - top)
        body.append(
            (
                "sink",
                *("" for _ in head[1:-3]),
                "" if logit is None else fmt(logit),
                "" if e_sink is None else fmt(e_sink, 3),
                fmt(weight, 3),
            )
        )
    blocks.append(Table(tuple(head), tuple(body), highlight=int(np.argmax(w)) if live else None))
    if live:
        denominator = "Σ e^(masked − max)"
        total = e.sum()
        if e_sink is not None:
            denominator = f"(e^(sink − max) + {denominator})"
            total += e_sink
        blocks.append(
            Formula(
                f"weight = e^(masked − max) ÷ {denominator} = e^(…) ÷ "
                f"{fmt(total, 3)}"
                + rounded_sum(e if e_sink is None else [*e, e_sink], "e^ values")
                + f"   (max = {fmt(top)}; subtracting it changes nothing but "
                f"keeps e^ from overflowing)"
            )
        )
        if sink:
            both = [*w, sink[1]]
            blocks.append(
                Formula(
                    f"sum of weights = {fmt(w.sum(), 3)}, and with the sink's "
                    f"{fmt(sink[1], 3)}: {fmt(sum(both), 3)}" + rounded_sum(both, "weights")
                )
            )
            blocks.append(
                "the sink takes part of the weight and hands back no value, so a "
                "query can attend to nothing in particular"
            )
        else:
            blocks.append(
                Formula(f"sum of weights = {fmt(w.sum(), 3)}" + rounded_sum(w, "weights"))
            )
        ent = float(entropy(w))
        blocks.append(
            Formula(
                f"entropy = -Σ w·ln w = {fmt(ent, 3)} nats; effective number of "
                f"attended tokens = exp(entropy) = {fmt(math.exp(ent))} of "
                f"{int(mask_row.sum())}"
            )
        )
        blocks.append(
            f"{me} attends most to {cols[int(np.argmax(w))]} (weight {fmt(np.max(w), 3)})"
        )
    elif sink:
        blocks.append(
            f"every key is masked for {me}: the sink takes all the weight, so its output is 0"
        )
    else:
        blocks.append(f"every key is masked for {me}: its weights are all 0 and its output is 0")
    title = " → ".join(
        [
            "scaled",
            "tempered",
            *(n for n in ("capped", "biased") if n in row),
            "masked",
            "weights (softmax" + (" with a sink)" if sink else ")"),
        ]
    )
    return section(f"4. {title}", *blocks)


def _optional_steps(row: dict, s: dict) -> list[Formula]:
    """The formula lines of soft-capping and the bias, when the trace has them."""
    blocks: list[Formula] = []
    if "capped" in row:
        cap = s.get("softcap")
        c = "cap" if cap is None else fmt(cap, 3)
        blocks.append(
            Formula(
                f"capped = cap·tanh(tempered ÷ cap) = {c}·tanh(tempered ÷ {c}) "
                f"(soft-capping: every score is squashed into (−{c}, {c}); "
                f"scores near 0 hardly change)"
            )
        )
    if "biased" in row:
        before = "capped" if "capped" in row else "tempered"
        blocks.append(
            Formula(
                f"biased = {before} + bias (one added number per query and key, "
                f"such as a relative-position bias or ALiBi's −slope·distance)"
            )
        )
    return blocks


def _sink(trace, pick, i, head) -> tuple[float | None, float] | None:
    """(the sink's logit, the weight it takes) for row i of head ``head``, or None without a
    sink; the logit is None when the trace's settings do not hold it."""
    if "sink" not in trace:
        return None
    logits = trace.settings.get("sinks") or [None]
    logit = logits[head] if len(logits) > 1 and head is not None else logits[0]
    return logit, float(pick(trace["sink"])[i][0])
