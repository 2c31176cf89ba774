"""What an experiment returns: a claim, a table, a verdict, and optionally a picture."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


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
        return {"name": self.name, "claim": self.claim, "columns": self.columns,
                "rows": self.rows, "supported": self.supported, "evidence": self.evidence,
                "verdict": self.verdict, **self.extra}
