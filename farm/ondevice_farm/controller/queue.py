"""The fleet's scheduling state: which units are up and idle, which jobs wait, and in what order.

Plain Python, no Ray: the fleet actor (`farm/ondevice_farm/controller/fleet.py`) owns one `Schedule` and asks
it, whenever something changes, which jobs to start on which units now.

Order: jobs of one submission start longest-expected first (LPT: the last jobs to finish are
short ones, which keeps the makespan near its lower bound); across submissions the schedule
takes turns (round-robin), so a big nightly does not starve an interactive `farm submit`.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.controller.queue_jobs import Attempt as Attempt
from ondevice_farm.controller.queue_jobs import JobSpec as JobSpec
from ondevice_farm.controller.queue_jobs import QueuedJob as QueuedJob
from ondevice_farm.controller.queue_lines import Line, SubmissionQueue
from ondevice_farm.controller.selection import DeviceSelector
from ondevice_farm_agents.base import DeviceUnit


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
    #: its actor died: the unit stays down until its agent registers it with a new actor
    actor_dead: bool = False
    #: `profile:SERIAL`, the line of the jobs pinned to this unit (made once: a start looks it up)
    pinned: DeviceSelector = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.pinned = DeviceSelector(self.unit.profile, self.unit.serial)

    @property
    def key(self) -> str:
        return self.unit.name


@dataclass
class Registration:
    """What one node's registration changed: units up, units gone, and units whose actor died
    (the agent must start a new actor for them: the fleet will not take the dead one again)."""

    added: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Unplaced:
    """A queued job no unit took in time: `lost` names the down unit it was pinned to."""

    job: QueuedJob
    message: str
    lost: bool = False


@dataclass
class Placement:
    """One look at the jobs no unit can take: jobs that began to wait, jobs moved from a lost
    unit to any unit of its profile, and jobs that failed."""

    waiting: list[QueuedJob] = field(default_factory=list)
    moved: list[Unplaced] = field(default_factory=list)
    expired: list[Unplaced] = field(default_factory=list)


class Schedule:
    def __init__(self) -> None:
        self.units: dict[str, UnitSlot] = {}
        self.queues: OrderedDict[str, SubmissionQueue] = OrderedDict()
        self.running: dict[str, tuple[QueuedJob, UnitSlot]] = {}

    # -- units ---------------------------------------------------------------------------

    def register(self, node_id: str, slots: list[UnitSlot]) -> Registration:
        """The full list of one node's units: new ones are added, missing ones marked down; a
        unit whose actor died stays down until it comes with another actor."""
        result = Registration()
        present = {s.key for s in slots}
        for slot in slots:
            old = self.units.get(slot.key)
            if old is not None and old.actor == slot.actor:
                if old.actor_dead:
                    result.dead.append(slot.key)
                    continue
                # the same actor again: keep the slot (a running job holds it) and mark it up
                if not old.up:
                    result.added.append(slot.key)
                old.up, old.reason, old.node_id, old.cooldown_s = True, "", slot.node_id, slot.cooldown_s
                continue
            result.added.append(slot.key)
            self.units[slot.key] = slot
        for key, slot in self.units.items():
            if slot.node_id == node_id and key not in present and slot.up:
                slot.up, slot.reason = False, "no longer attached"
                result.gone.append(key)
        return result

    def mark_down(self, key: str, reason: str, *, actor_dead: bool = False) -> None:
        slot = self.units.get(key)
        if slot is not None:
            slot.up, slot.reason = False, reason
            slot.actor_dead = slot.actor_dead or actor_dead

    def mark_node_down(self, node_id: str, reason: str) -> list[str]:
        keys = [k for k, s in self.units.items() if s.node_id == node_id and s.up]
        for key in keys:
            self.mark_down(key, reason)
        return keys

    # -- jobs ----------------------------------------------------------------------------

    def enqueue(self, submission: str, specs: list[JobSpec], now: float | None = None) -> None:
        queued_at = time.time()
        queue = self.queues.setdefault(submission, SubmissionQueue())
        ordered = sorted(specs, key=lambda s: -(s.expected_s or 0.0))
        queue.add(
            [QueuedJob(spec=s, submission=submission, queued_at=queued_at) for s in ordered],
            time.monotonic() if now is None else now,
        )

    def requeue(self, job: QueuedJob, now: float | None = None) -> None:
        """A job to try again: first in its submission's line."""
        queue = self.queues.setdefault(job.submission, SubmissionQueue())
        queue.push_front(job, time.monotonic() if now is None else now)

    def cancel(self, submission: str) -> list[QueuedJob]:
        queue = self.queues.pop(submission, None)
        if queue is None:
            return []
        return list(queue)

    def pending(self) -> int:
        # a sum over submissions (a few), each queue's own count: no second count to keep in step
        return sum(len(q) for q in self.queues.values())

    def _idle(self, now: float) -> dict[str, list[UnitSlot]]:
        idle: dict[str, list[UnitSlot]] = {}
        for slot in self.units.values():
            if slot.up and slot.running is None and slot.free_at <= now:
                idle.setdefault(slot.unit.profile, []).append(slot)
        return idle

    @staticmethod
    def _pick(job: QueuedJob, idle: list[UnitSlot]) -> UnitSlot | None:
        candidates = [s for s in idle if job.spec.selector.matches(s.unit)]
        if not candidates:
            return None
        fresh = [s for s in candidates if s.key not in job.avoid]
        # least-used first spreads a suite over the fleet rather than over the first node
        return min(fresh or candidates, key=lambda s: s.jobs_done)

    @staticmethod
    def _next(queue: SubmissionQueue, idle: dict[str, list[UnitSlot]]) -> QueuedJob | None:
        """The submission's lowest-ranked job an idle unit can take: only the lines of the idle
        units' profiles and of their own serials are looked at, never the queued jobs."""
        best: QueuedJob | None = None
        for profile, slots in idle.items():
            if not slots:
                continue
            selectors = [DeviceSelector(profile)]
            if queue.pinned(profile):
                selectors += [s.pinned for s in slots]
            for selector in selectors:
                head = queue.head(selector)
                if head is not None and (best is None or head.rank < best.rank):
                    best = head
        return best

    def assign(self, now: float | None = None) -> list[tuple[QueuedJob, UnitSlot]]:
        """Jobs to start now, taking turns across submissions."""
        now = time.monotonic() if now is None else now
        idle = self._idle(now)
        started: list[tuple[QueuedJob, UnitSlot]] = []
        progress = True
        while progress and any(idle.values()):
            progress = False
            for submission in list(self.queues):
                queue = self.queues[submission]
                job = self._next(queue, idle)
                if job is None:
                    continue
                profile_idle = idle[job.spec.selector.profile]
                slot = self._pick(job, profile_idle)
                assert slot is not None  # `_next` only offers a job some idle unit matches
                queue.pop(job.spec.selector)
                profile_idle.remove(slot)
                slot.running = job.spec.job_id
                self.running[job.spec.job_id] = (job, slot)
                started.append((job, slot))
                progress = True
                self.queues.move_to_end(submission)  # the next turn is another submission's
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

    def _down_unit(self, selector: DeviceSelector) -> UnitSlot | None:
        """The registered, down unit a pinned selector names (None: not pinned, or not known)."""
        if selector.serial is None:
            return None
        slot = self.units.get(f"{selector.profile}:{selector.serial}")
        return slot if slot is not None and not slot.up else None

    def unplaceable(self, now: float | None = None) -> Placement:
        """Look at each line (not each job) no up unit can serve: its jobs begin to wait, and
        those past their deadline fail or, pinned to a lost unit and movable, go to any unit of
        the profile. Cost: the lines, plus the jobs of a line only when it starts waiting or a
        deadline in it passes."""
        now = time.monotonic() if now is None else now
        result = Placement()
        up = {(s.unit.profile, s.unit.serial) for s in self.units.values() if s.up}
        up_profiles = {profile for profile, _ in up}
        for queue in list(self.queues.values()):
            for selector, line in list(queue.lines.items()):
                placeable = (
                    selector.profile in up_profiles
                    if selector.serial is None
                    else (selector.profile, selector.serial) in up
                )
                if placeable:
                    line.stop_waiting()
                    continue
                down = self._down_unit(selector)
                if line.waiting_since is None:
                    deadline_s = min(j.spec.unit_down_deadline_s for j in line.jobs) if down else float("inf")
                    result.waiting += line.start_waiting(now, deadline_s)
                    continue
                result.waiting += line.unannounced
                line.unannounced = []
                expired = queue.expire(selector, now)
                if not expired:
                    continue
                self._unplaced(line, expired, down, now, result)
            queue.drop_empty()
        for submission in [s for s, q in self.queues.items() if not q]:
            del self.queues[submission]
        return result

    def _unplaced(
        self, line: Line, jobs: list[QueuedJob], down: UnitSlot | None, now: float, result: Placement
    ) -> None:
        selector = line.selector
        if down is None:
            message = f"no unit of {selector} came up within {jobs[0].spec.placement_deadline_s:.0f}s"
            result.expired += [Unplaced(job, message) for job in jobs]
            return
        waited_s = min(line.deadline_s, jobs[0].spec.placement_deadline_s)
        reason = f"unit {selector} is lost ({down.reason or 'down'})"
        lost = f"{reason}; it did not come back within {waited_s:.0f}s"
        for job in jobs:
            if not job.spec.movable:
                result.expired.append(Unplaced(job, lost, lost=True))
                continue
            job.spec = dataclasses.replace(job.spec, selector=DeviceSelector(selector.profile), movable=False)
            self.requeue(job, now)
            result.moved.append(
                Unplaced(job, f"{reason}: moved to any unit of {selector.profile}", lost=True)
            )

    def next_wakeup(self, now: float) -> float | None:
        """Seconds until a cooling unit becomes free, if any job waits for one."""
        cooling = [
            s.free_at - now for s in self.units.values() if s.up and s.running is None and s.free_at > now
        ]
        return min(cooling) if cooling and self.pending() else None
