"""``qkv heads --taxonomy``: every head of a model scored as a previous-token, first-token,
duplicate-token and induction head (``qkv.hf.taxonomy``), printed as a grid and top lists."""

from __future__ import annotations

from qkv.cli.errors import CliError
from qkv.explain.head_kinds import MEANINGS

SHORT = {"previous": "prev", "first": "first", "duplicate": "dup", "induction": "ind"}
# A head is named by a kind only when it puts at least this much weight there on average.
SHOWN = 0.3

HELP = (
    "score every head on repeated random tokens instead of TEXT: "
    + ", ".join(f"{SHORT[k]} = {m}" for k, m in MEANINGS.items())
    + f"; each a mean weight in [0, 1]; a cell names the head's highest kind when it is "
    f"≥ {SHOWN}"
)


def show(model, *, seed: int = 0, as_json: bool = False) -> None:
    """Print the taxonomy of a model as rich tables, or as JSON: each kind's score per layer
    and head, and the top heads of each kind."""
    try:
        from qkv.hf import taxonomy
    except ImportError as e:
        raise CliError(str(e)) from None
    s = taxonomy.measure(model, seed=seed)
    if as_json:
        import json

        import click

        scores = {kind: getattr(s, kind).tolist() for kind in taxonomy.KINDS}
        tops = {kind: [list(t) for t in s.top(kind, 3)] for kind in taxonomy.KINDS}
        click.echo(json.dumps({"model": model.name, "sequences": s.sequences, "half": s.half,
                               "scores": scores, "top": tops}))  # fmt: skip
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(80, 13 * model.n_heads + 10))
    grid = Table(
        title=f"{model.name}: what each head does on {s.sequences} random sequences "
        f"of {s.half} tokens, repeated",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
    )
    grid.add_column("layer", justify="right", min_width=5)
    for h in range(model.n_heads):
        grid.add_column(f"h{h}", no_wrap=True)
    for layer in range(model.n_layers):
        cells = []
        for h in range(model.n_heads):
            kind = max(taxonomy.KINDS, key=lambda k: getattr(s, k)[layer, h])
            score = getattr(s, kind)[layer, h]
            cells.append(f"{SHORT[kind]} {score:.2f}".replace("0.", ".") if score >= SHOWN else "–")
        grid.add_row(str(layer), *cells)
    console.print(grid)
    for kind in taxonomy.KINDS:
        top = ", ".join(f"{layer}.{h} ({score:.2f})" for layer, h, score in s.top(kind, 3))
        console.print(
            f"top {kind}-token heads: {top}"
            if kind != "induction"
            else f"top induction heads: {top}"
        )
