"""What a submitter hears of a finished job: its id, status, unit and a few figures, never the
job's measurements or document (those stay with the store's owner, docs/architecture.md
"Where a job's result goes"). A progress line and a run's status need nothing more.

No numpy here: the thin API submitter reads these too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.analysis.reference_state import reference_state

#: a generation job's figures a progress line shows (each a few numbers: median, spread, count)
GENERATION_FIGURES = ("ttft_ms", "decode_tokens_per_s")


@dataclass(frozen=True)
class JobSummary:
    """A stored job in a few fields; `to_document()` gives them under the job document's own keys."""

    job_id: str
    status: str
    device: str
    target: str
    requested: str
    unit: str | None = None
    error: str | None = None
    error_type: str | None = None
    p50_ms: float | None = None
    #: the reference check's state (passed | failed | not_compared) and, unless passed, why
    reference: str | None = None
    reference_reason: str | None = None
    #: a generation job's progress figures and token agreement (GENERATION_FIGURES, "agreement")
    generation: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def of(cls, document: dict[str, Any]) -> JobSummary:
        """The summary of a job document (whole, or without its bulky parts)."""
        state = reference_state(document)
        latency = document.get("latency_ms")
        generation = document.get("generation")
        p50 = latency.get("p50") if isinstance(latency, dict) else None
        return cls(
            job_id=str(document["job_id"]),
            status=str(document["status"]),
            device=str(document.get("device")),
            target=str(document.get("target")),
            requested=str(document.get("requested") or document.get("device")),
            unit=document.get("unit"),
            error=document.get("error"),
            error_type=document.get("error_type"),
            p50_ms=float(p50) if isinstance(p50, int | float) else None,
            reference=state.state,
            reference_reason=state.reason,
            generation=_generation_figures(generation) if isinstance(generation, dict) else {},
        )

    def to_document(self) -> dict[str, Any]:
        """The summary under a job document's keys, for what reads a job's top line (progress)."""
        document: dict[str, Any] = {
            "job_id": self.job_id,
            "status": self.status,
            "device": self.device,
            "target": self.target,
            "requested": self.requested,
            "unit": self.unit,
            "error": self.error,
            "error_type": self.error_type,
        }
        if self.p50_ms is not None:
            document["latency_ms"] = {"p50": self.p50_ms}
        if self.reference is not None:
            document["reference"] = {"status": self.reference, "reason": self.reference_reason}
        if self.generation:
            document["generation"] = dict(self.generation)
        return document


def _generation_figures(generation: dict[str, Any]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name in GENERATION_FIGURES:
        figure = generation.get(name)
        if isinstance(figure, dict):
            # one per timed generation: a handful
            figures[name] = {k: figure.get(k) for k in ("median", "std", "samples")}
    if isinstance(generation.get("agreement"), dict):
        figures["agreement"] = dict(generation["agreement"])
    return figures


@dataclass
class RunCounts:
    """A run's jobs as counts: its status, without holding its jobs."""

    ok: int = 0
    failed: int = 0

    def add(self, status: str) -> None:
        if status == "ok":
            self.ok += 1
        else:
            self.failed += 1

    @property
    def total(self) -> int:
        return self.ok + self.failed

    def status(self) -> str:
        if self.failed == 0:
            return "complete"
        return "failed" if self.ok == 0 else "partial"
