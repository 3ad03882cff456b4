"""What a submitter hears from the fleet: each job's events, held per submission until its next
poll. A job's final event is small (ids, timings and a `JobSummary`) for a job the fleet wrote,
so a submitter that falls behind makes this grow by summaries, never by results."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.controller.job_context import JobEnd
from ondevice_farm.controller.job_summary import JobSummary
from ondevice_farm.errors import FarmError
from ondevice_farm_agents.base import DeviceRun


@dataclass
class JobEvent:
    """What happened to a job: waiting | retrying | progress | done | failed (which unit runs
    what: `units()`). A written job's final event carries its `summary` (the job is in the store);
    a job its submitter writes itself (`farm compare`) has its `run` in the `done` event."""

    job_id: str
    kind: str
    message: str = ""
    unit: str | None = None
    run: DeviceRun | None = None
    summary: JobSummary | None = None
    error: FarmError | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    queued_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def final(self) -> bool:
        return self.kind in ("done", "failed")

    @classmethod
    def ended(cls, job_id: str, end: JobEnd, summary: JobSummary | None = None) -> JobEvent:
        """The job's final event: with its `summary` once the fleet wrote it, else with its run."""
        if summary is not None:
            kind, message, run, unit = (
                ("done" if summary.ok else "failed"),
                summary.error or "",
                None,
                summary.unit,
            )
        else:
            kind, message, run, unit = ("failed" if end.run is None else "done"), end.message, end.run, None
        return cls(
            job_id,
            kind,
            message=message,
            unit=unit or end.unit,
            run=run,
            summary=summary,
            error=end.error,
            attempts=end.attempts,
            queued_at=end.queued_at,
            started_at=end.started_at,
            finished_at=end.finished_at,
        )


class EventBoard:
    """Each open submission's events since its last poll, and the signal that wakes that poll."""

    def __init__(self) -> None:
        self._events: dict[str, list[JobEvent]] = {}
        self._signals: dict[str, asyncio.Event] = {}

    def open(self, submission: str) -> None:
        self._events.setdefault(submission, [])

    def close(self, submission: str) -> None:
        """Forget the submission: its later events are dropped (it was cancelled)."""
        self._events.pop(submission, None)
        self._signals.pop(submission, None)

    def emit(self, submission: str, event: JobEvent) -> None:
        if submission not in self._events:
            return  # cancelled
        self._events[submission].append(event)
        signal = self._signals.get(submission)
        if signal is not None:
            signal.set()

    async def take(self, submission: str, timeout_s: float) -> list[JobEvent]:
        """The submission's events since the last take; waits up to `timeout_s` for one."""
        if not self._events.get(submission):
            signal = self._signals.setdefault(submission, asyncio.Event())
            signal.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(signal.wait(), timeout_s)
        events = self._events.get(submission, [])
        if submission in self._events:
            self._events[submission] = []
        return events
