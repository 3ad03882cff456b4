"""What a process holds of a run's jobs, counted among its live objects (not timed): whole job
documents and units' results. Imported by the driver scripts of the results-stream and simulated-
lab tests, which run in a process of their own."""

from __future__ import annotations

import gc
from typing import Any


def is_document(o: object) -> bool:
    """A whole job document (a summary has neither key)."""
    return type(o) is dict and "job_id" in o and ("provenance" in o or "trace_events" in o)


def is_job(o: object) -> bool:
    """A job as the store gives it or the nightly keeps it: a whole document, a store summary, a
    kept view of one. Not a `JobSummary`'s fields or a progress line (the few of a poll in passing):
    those name no model."""
    return type(o) is dict and "job_id" in o and "status" in o and "model" in o


def held() -> dict[str, int]:
    from ondevice_farm.controller.fleet import JobEvent
    from ondevice_farm_agents.base import DeviceRun

    gc.collect()
    objects = gc.get_objects()
    return {
        "documents": sum(1 for o in objects if is_document(o)),
        "summaries": sum(1 for o in objects if is_job(o)),
        "runs": sum(1 for o in objects if isinstance(o, DeviceRun))
        + sum(1 for o in objects if isinstance(o, JobEvent) and o.run is not None),
    }


class CountingProgress:
    """A submission's progress (ondevice_farm.progress.Progress) that counts what the process
    holds every `every` finished jobs and at the last, keeping the peak of each count."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.total = self.done = 0
        self.peak = {"documents": 0, "summaries": 0, "runs": 0}

    def stage(self, text: str) -> None:
        pass

    def jobs_started(self, total: int) -> None:
        self.total = total

    def job_finished(self, job: dict[str, Any]) -> None:
        self.done += 1
        if self.done % self.every == 0 or self.done == self.total:
            for key, count in held().items():
                self.peak[key] = max(self.peak[key], count)
