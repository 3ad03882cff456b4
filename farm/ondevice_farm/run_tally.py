"""A finished run in a few counts, taken as its jobs stream past: what a run's headline, the
nightly's Pushgateway summary and its HTML page say of the run as a whole. A night of 300,000 jobs
costs a dozen numbers here, not its job list (each job summary is ~40 kB once parsed).

No numpy here: the metrics and the nightly both read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.analysis.reference_state import FAILED, NOT_COMPARED, PASSED, reference_state

#: the reference check's states, in the order they are reported
REFERENCE_STATES = (PASSED, FAILED, NOT_COMPARED)


def _time(job: dict[str, Any], key: str) -> float | None:
    value = job.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass
class RunTally:
    """Jobs by status; the earliest queue time and the latest finish; and the reference check's
    state of every successful job measured on a real unit (a simulated unit's outputs are
    synthetic: its check says nothing of real numerics, and no reference alert may count it)."""

    statuses: dict[str, int] = field(default_factory=lambda: {"ok": 0, "failed": 0})
    first_queued_at: float | None = None
    last_finished_at: float | None = None
    reference_states: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REFERENCE_STATES, 0))

    @classmethod
    def of(cls, jobs: Iterable[dict[str, Any]]) -> RunTally:
        tally = cls()
        for job in jobs:
            tally.add(job)
        return tally

    def add(self, job: dict[str, Any]) -> None:
        status = str(job.get("status", "failed"))
        self.statuses[status] = self.statuses.get(status, 0) + 1
        queued, finished = _time(job, "queued_at"), _time(job, "finished_at")
        if queued is not None and (self.first_queued_at is None or queued < self.first_queued_at):
            self.first_queued_at = queued
        if finished is not None and (self.last_finished_at is None or finished > self.last_finished_at):
            self.last_finished_at = finished
        synthetic = (job.get("provenance") or {}).get("latency") == "synthetic"
        if status == "ok" and not synthetic:
            state = reference_state(job).state
            self.reference_states[state] = self.reference_states.get(state, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.statuses.values())

    @property
    def ok(self) -> int:
        return self.statuses.get("ok", 0)

    @property
    def wall_s(self) -> float | None:
        """From the first job queued to the last one finished, where both are known."""
        if self.first_queued_at is None or self.last_finished_at is None:
            return None
        return self.last_finished_at - self.first_queued_at

    def counts(self) -> dict[str, Any]:
        """The run document's `job_counts`: every job, the successful ones, and by status."""
        return {"total": self.total, "ok": self.ok, "by_status": dict(sorted(self.statuses.items()))}
