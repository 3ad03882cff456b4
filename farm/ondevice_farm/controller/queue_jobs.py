"""The fleet's jobs as its queue holds them: what may run where, and each attempt so far."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.config import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PLACEMENT_DEADLINE_S,
    DEFAULT_UNIT_DOWN_DEADLINE_S,
)
from ondevice_farm.controller.selection import DeviceSelector
from ondevice_farm_agents.base import RunRequest


@dataclass(frozen=True)
class JobSpec:
    """One job as the fleet sees it: where it may run and what the unit must do."""

    job_id: str
    selector: DeviceSelector
    request: RunRequest
    #: ObjectRef of the artifact's bytes, for nodes that do not share the submitter's filesystem
    artifact_blob: Any = None
    #: a paired job's baseline artifact (`RunRequest.paired`), shipped as `artifact_blob` is
    baseline_blob: Any = None
    #: a guess of the job's duration (history, runs x latency); orders the queue longest first
    expected_s: float | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    placement_deadline_s: float = DEFAULT_PLACEMENT_DEADLINE_S
    #: a job pinned to one unit (`pixel8:SERIAL`, `pixel8:*`) whose unit is down fails this soon,
    #: with the unit's reason (the placement deadline is for a unit that may still be attached)
    unit_down_deadline_s: float = DEFAULT_UNIT_DOWN_DEADLINE_S
    #: a pinned job whose unit is lost runs on another unit of the profile instead of failing
    #: (a suite's `units_interchangeable: true`)
    movable: bool = False


@dataclass
class Attempt:
    unit: str
    started_at: float
    finished_at: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "error": self.error,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


@dataclass(eq=False)
class QueuedJob:
    """Compared by identity: the queue finds and drops jobs, never equal copies."""

    spec: JobSpec
    submission: str
    queued_at: float
    attempts: list[Attempt] = field(default_factory=list)
    #: units this job already failed on: another unit of the profile is preferred
    avoid: set[str] = field(default_factory=set)
    #: its place in its submission's order (`queue_lines`)
    rank: int = 0
    #: monotonic time it joined its line while the line already waited for a unit (None: it was
    #: there when the waiting began): its own deadline counts from then
    wait_from: float | None = None
