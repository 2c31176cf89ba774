"""What an experiment returns: a claim, a table, a verdict, and optionally a picture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Result:
    name: str
    claim: str  # what the tutorials say, in one sentence
    columns: list[str]
    rows: list[list[Any]]
    supported: bool  # whether the numbers support the claim
    evidence: str  # the numbers the verdict rests on
    extra: dict[str, Any] = field(default_factory=dict)  # further numbers for --format json
    plot: Callable[[Any], None] | None = None  # draws onto a matplotlib Figure

    @property
    def verdict(self) -> str:
        word = "SUPPORTED" if self.supported else "NOT SUPPORTED"
        return f"{word}: {self.claim} ({self.evidence})"

    def to_dict(self) -> dict:
        """The fields a JSON report carries (not the plot), the verdict and the extra numbers."""
        shown = ("name", "claim", "columns", "rows", "supported", "evidence")
        return {**{f: getattr(self, f) for f in shown}, "verdict": self.verdict, **self.extra}


def loglog_panels(fig, x, xlabel: str, panels) -> None:
    """Side-by-side log-log panels sharing x: each panel is (title, [(y, style, label), ...]).
    The x ticks are the measured x values, in plain numbers (no minor tick labels to collide)."""
    for ax, (title, lines) in zip(fig.subplots(1, len(panels)), panels, strict=False):
        for y, style, label in lines:
            ax.loglog(x, y, style, label=label)
        ax.set_xticks([], minor=True)
        ax.set_xticks(list(x), [f"{v:g}" for v in x])
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
