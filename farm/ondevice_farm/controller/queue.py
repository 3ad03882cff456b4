"""The fleet's scheduling state: which units are up and idle, which jobs wait, and in what order.

Plain Python, no Ray: the fleet actor (`farm/ondevice_farm/controller/fleet.py`) owns one `Schedule` and asks
it, whenever something changes, which jobs to start on which units now.

Order: jobs of one submission start longest-expected first (LPT: the last jobs to finish are
short ones, which keeps the makespan near its lower bound); across submissions the schedule
takes turns (round-robin), so a big nightly does not starve an interactive `farm submit`.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.config import DEFAULT_MAX_ATTEMPTS, DEFAULT_PLACEMENT_DEADLINE_S
from ondevice_farm.controller.selection import DeviceSelector
from ondevice_farm_agents.base import DeviceUnit, RunRequest


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


@dataclass
class QueuedJob:
    spec: JobSpec
    submission: str
    queued_at: float
    attempts: list[Attempt] = field(default_factory=list)
    #: units this job already failed on: another unit of the profile is preferred
    avoid: set[str] = field(default_factory=set)
    #: monotonic time since when no unit of the profile is up (None: one is up)
    waiting_since: float | None = None


@dataclass
class UnitSlot:
    unit: DeviceUnit
    actor: Any
    node_id: str
    cooldown_s: float = 0.0
    up: bool = True
    reason: str = ""
    running: str | None = None
    #: monotonic time at which the unit's cool-down ends
    free_at: float = 0.0
    jobs_done: int = 0

    @property
    def key(self) -> str:
        return self.unit.name


class Schedule:
    def __init__(self) -> None:
        self.units: dict[str, UnitSlot] = {}
        self.queues: OrderedDict[str, deque[QueuedJob]] = OrderedDict()
        self.running: dict[str, tuple[QueuedJob, UnitSlot]] = {}

    # -- units ---------------------------------------------------------------------------

    def register(self, node_id: str, slots: list[UnitSlot]) -> tuple[list[str], list[str]]:
        """The full list of one node's units: new ones are added, missing ones marked down."""
        added, gone = [], []
        present = {s.key for s in slots}
        for slot in slots:
            old = self.units.get(slot.key)
            if old is not None and old.actor == slot.actor:
                # the same actor again: keep the slot (a running job holds it) and mark it up
                if not old.up:
                    added.append(slot.key)
                old.up, old.reason, old.node_id, old.cooldown_s = True, "", slot.node_id, slot.cooldown_s
                continue
            added.append(slot.key)
            self.units[slot.key] = slot
        for key, slot in self.units.items():
            if slot.node_id == node_id and key not in present and slot.up:
                slot.up, slot.reason = False, "no longer attached"
                gone.append(key)
        return added, gone

    def mark_down(self, key: str, reason: str) -> None:
        slot = self.units.get(key)
        if slot is not None:
            slot.up, slot.reason = False, reason

    def mark_node_down(self, node_id: str, reason: str) -> list[str]:
        keys = [k for k, s in self.units.items() if s.node_id == node_id and s.up]
        for key in keys:
            self.mark_down(key, reason)
        return keys

    # -- jobs ----------------------------------------------------------------------------

    def enqueue(self, submission: str, specs: list[JobSpec]) -> None:
        now = time.time()
        queue = self.queues.setdefault(submission, deque())
        ordered = sorted(specs, key=lambda s: -(s.expected_s or 0.0))
        queue.extend(QueuedJob(spec=s, submission=submission, queued_at=now) for s in ordered)

    def requeue(self, job: QueuedJob) -> None:
        """A job to try again: first in its submission's line."""
        self.queues.setdefault(job.submission, deque()).appendleft(job)

    def cancel(self, submission: str) -> list[QueuedJob]:
        return list(self.queues.pop(submission, deque()))

    def pending(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def _idle(self, now: float) -> dict[str, list[UnitSlot]]:
        idle: dict[str, list[UnitSlot]] = {}
        for slot in self.units.values():
            if slot.up and slot.running is None and slot.free_at <= now:
                idle.setdefault(slot.unit.profile, []).append(slot)
        return idle

    def _pick(self, job: QueuedJob, idle: dict[str, list[UnitSlot]]) -> UnitSlot | None:
        candidates = [s for s in idle.get(job.spec.selector.profile, ()) if job.spec.selector.matches(s.unit)]
        if not candidates:
            return None
        fresh = [s for s in candidates if s.key not in job.avoid]
        # least-used first spreads a suite over the fleet rather than over the first node
        return min(fresh or candidates, key=lambda s: s.jobs_done)

    def assign(self, now: float | None = None) -> list[tuple[QueuedJob, UnitSlot]]:
        """Jobs to start now, taking turns across submissions."""
        now = time.monotonic() if now is None else now
        idle = self._idle(now)
        started: list[tuple[QueuedJob, UnitSlot]] = []
        blocked: set[DeviceSelector] = set()
        progress = True
        while progress and any(idle.values()):
            progress = False
            for submission in list(self.queues):
                queue = self.queues[submission]
                for index, job in enumerate(queue):
                    if job.spec.selector in blocked:
                        continue
                    slot = self._pick(job, idle)
                    if slot is None:
                        blocked.add(job.spec.selector)
                        continue
                    del queue[index]
                    idle[slot.unit.profile].remove(slot)
                    slot.running = job.spec.job_id
                    self.running[job.spec.job_id] = (job, slot)
                    job.waiting_since = None
                    started.append((job, slot))
                    progress = True
                    self.queues.move_to_end(submission)  # the next turn is another submission's
                    break
                if progress:
                    break
        for submission in [s for s, q in self.queues.items() if not q]:
            del self.queues[submission]
        return started

    def release(self, job_id: str, now: float | None = None) -> tuple[QueuedJob, UnitSlot] | None:
        entry = self.running.pop(job_id, None)
        if entry is None:
            return None
        _job, slot = entry
        now = time.monotonic() if now is None else now
        if slot.running == job_id:
            slot.running = None
            slot.free_at = now + slot.cooldown_s
            slot.jobs_done += 1
        return entry

    def unplaceable(self, now: float | None = None) -> tuple[list[QueuedJob], list[QueuedJob]]:
        """(jobs that just started waiting for a unit to come up, jobs past their deadline)."""
        now = time.monotonic() if now is None else now
        started_waiting, expired = [], []
        up = {(s.unit.profile, s.unit.serial) for s in self.units.values() if s.up}
        up_profiles = {profile for profile, _ in up}
        for queue in self.queues.values():
            for job in list(queue):
                selector = job.spec.selector
                placeable = (
                    selector.profile in up_profiles
                    if selector.serial is None
                    else (selector.profile, selector.serial) in up
                )
                if placeable:
                    job.waiting_since = None
                    continue
                if job.waiting_since is None:
                    job.waiting_since = now
                    started_waiting.append(job)
                elif now - job.waiting_since >= job.spec.placement_deadline_s:
                    queue.remove(job)
                    expired.append(job)
        return started_waiting, expired

    def next_wakeup(self, now: float) -> float | None:
        """Seconds until a cooling unit becomes free, if any job waits for one."""
        cooling = [
            s.free_at - now for s in self.units.values() if s.up and s.running is None and s.free_at > now
        ]
        return min(cooling) if cooling and self.pending() else None
