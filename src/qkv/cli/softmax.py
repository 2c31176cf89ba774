"""``qkv softmax``: the refresher the tutorials start from, every exponential shown."""

from __future__ import annotations

import json
import math

import click

from qkv.cli.common import Number, echo_sections, format_option, temperature_option
from qkv.cli.errors import CliError


@click.command(
    short_help="The softmax refresher: e^(x/τ), their sum, the probabilities.",
    context_settings={"ignore_unknown_options": True},
)
@click.argument("scores", nargs=-1, type=Number(name="each score"), required=True)
@temperature_option("τ > 0 divides every score first.  Example: -t 2")
@format_option()
def softmax(scores, temperature, fmt):
    """Softmax of SCORES, step by step: each e^(x_i/τ), their sum, the probabilities.

    \b
    Examples:
      qkv softmax 2 1 0
      qkv softmax 2 1 0 --temperature 0.5
      qkv softmax -1 0 1 --format plain
    """
    import numpy as np

    from qkv import steps
    from qkv.explain.format import Table, section
    from qkv.explain.walkthrough import fmt as num

    tau = temperature
    x = np.asarray(scores, dtype=np.float64)
    with np.errstate(over="ignore"):
        t = steps.temper(x, tau)  # (n,)
    if not np.isfinite(t).all():
        raise CliError(
            f"--temperature {tau:g} is too small for these scores: x/τ overflows "
            f"float64 (largest |x/τ| must stay below 1.8e308)"
        )
    p = steps.softmax(t)  # (n,), computed with the row max subtracted
    shift = float(t.max()) if abs(t.max()) > 700 else 0.0  # e^710 overflows, e^-746 is 0
    e = np.exp(t - shift)
    if fmt == "json":
        click.echo(
            json.dumps(
                {
                    "scores": x.tolist(),
                    "temperature": tau,
                    "exp": e.tolist(),
                    "exp_shift": shift,
                    "sum": float(e.sum()),
                    "probabilities": p.tolist(),
                    "entropy": float(steps.entropy(p)),
                },
                indent=2,
            )
        )
        return
    power = "x/τ" if shift == 0 else f"x/τ − {num(shift)}" if shift > 0 else f"x/τ + {num(-shift)}"
    rows = tuple(
        (f"x[{i}]", num(x[i]), num(t[i], 3), f"{e[i]:.4g}", num(p[i], 2), num(p[i], 4))
        for i in range(x.size)
    )
    ent = float(steps.entropy(p))
    lines = [
        f"Σ e^({power}) = " + " + ".join(f"{v:.4g}" for v in e) + f" = {e.sum():.4g}",
        "p_i = e^(" + power + ") ÷ Σ; the probabilities sum to " + num(p.sum(), 3),
        f"softmax({', '.join(f'{v:g}' for v in x)}) ≈ [{', '.join(num(v) for v in p)}]",
        f"entropy = {num(ent, 3)} nats; effective number of choices = exp(entropy) = "
        f"{num(math.exp(ent))} of {x.size}",
    ]
    if shift:
        lines.insert(
            0,
            f"(the max {num(shift)} is subtracted from every exponent so e^ neither "
            "overflows nor underflows to 0; the probabilities do not change)",
        )
    echo_sections(
        [
            section(
                f"softmax with τ = {tau:g}",
                Table(("", "x", "x/τ", f"e^({power})", "p", "p (4 d.p.)"), rows),
                *lines,
            )
        ],
        fmt,
    )
