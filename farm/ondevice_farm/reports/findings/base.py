"""What a finding is: one sentence, the evidence behind it, and how much it explains."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.reports.compare import Comparison


@dataclass(frozen=True)
class Finding:
    #: the rule that produced it (its function's name)
    rule: str
    #: how much of the difference it explains, 0..1 (a failed job or failed check is 1)
    weight: float
    text: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "weight": round(self.weight, 4),
            "text": self.text,
            "evidence": self.evidence,
        }


Rule = Callable[[Comparison], list[Finding]]


def pct(value: float) -> str:
    return f"{value * 100:.0f}%" if value >= 0.01 else f"{value * 100:.1f}%"
