"""A submission's queued jobs, one line per device selector.

The fleet's `Schedule` starts a job by looking only at the lines an idle unit can serve (its
profile's line and its own pinned line), and expires the jobs of a line no unit can serve
without touching the jobs of any other line: at 300,000 queued jobs, a scan of every job per
started job or per expiry (what a single deque per submission needed, `deque.remove` included)
stalls the fleet's one loop for minutes.

Order: every job has a rank; a submission's next job is the lowest-ranked head among the lines
that can start. Enqueued jobs are ranked longest-expected first (LPT), after what is queued;
a retried job goes before everything (most recent retry first), as the one queue did.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from ondevice_farm.controller.queue_jobs import QueuedJob
from ondevice_farm.controller.selection import DeviceSelector


@dataclass
class Line:
    """The queued jobs of one submission for one selector, by rank."""

    selector: DeviceSelector
    jobs: deque[QueuedJob] = field(default_factory=deque)
    #: monotonic time since when no unit that can take this line is up (None: one is up)
    waiting_since: float | None = None
    #: the deadline each waiting job gets (seconds), fixed when the line starts waiting
    deadline_s: float = math.inf
    #: the earliest time at which one of the line's waiting jobs passes its deadline
    next_expiry: float = math.inf
    #: jobs that joined the line while it waited and were not yet told so
    unannounced: list[QueuedJob] = field(default_factory=list)

    def expiry_of(self, job: QueuedJob) -> float:
        """When a job of this waiting line fails: its deadline from when it began to wait here. A
        movable job of a lost unit (a finite unit-down deadline) does not wait for the unit: its
        suite said any unit of the profile will do."""
        assert self.waiting_since is not None
        began = self.waiting_since if job.wait_from is None else job.wait_from
        deadline_s = 0.0 if job.spec.movable and math.isfinite(self.deadline_s) else self.deadline_s
        return began + min(deadline_s, job.spec.placement_deadline_s)

    def start_waiting(self, now: float, deadline_s: float) -> list[QueuedJob]:
        self.waiting_since, self.deadline_s, self.unannounced = now, deadline_s, []
        for job in self.jobs:
            job.wait_from = None
        self.next_expiry = min((self.expiry_of(j) for j in self.jobs), default=math.inf)
        return list(self.jobs)

    def stop_waiting(self) -> None:
        self.waiting_since, self.deadline_s, self.next_expiry, self.unannounced = None, math.inf, math.inf, []

    def joined(self, job: QueuedJob, now: float) -> None:
        job.wait_from = None
        if self.waiting_since is not None:
            job.wait_from = now
            self.unannounced.append(job)
            self.next_expiry = min(self.next_expiry, self.expiry_of(job))

    def expire(self, now: float) -> list[QueuedJob]:
        """The waiting jobs past their deadline, taken out of the line (one pass, only when one is due)."""
        if now < self.next_expiry:
            return []
        kept: deque[QueuedJob] = deque()
        expired: list[QueuedJob] = []
        for job in self.jobs:
            (expired if now >= self.expiry_of(job) else kept).append(job)
        self.jobs = kept
        gone = {id(j) for j in expired}
        self.unannounced = [j for j in self.unannounced if id(j) not in gone]
        self.next_expiry = min((self.expiry_of(j) for j in kept), default=math.inf)
        return expired


class SubmissionQueue:
    """One submission's lines, and the ranks that order them."""

    def __init__(self) -> None:
        self.lines: dict[DeviceSelector, Line] = {}
        self.size = 0
        self._next_rank = 0
        self._next_retry_rank = -1
        #: profile -> lines pinned to one of its units: `Schedule` looks up units' own lines only
        #: where a submission has some
        self._pinned: dict[str, int] = {}

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[QueuedJob]:
        """Every queued job by rank (for reading and cancelling, not for the scheduling path)."""
        return iter(sorted((j for line in self.lines.values() for j in line.jobs), key=lambda j: j.rank))

    def pinned(self, profile: str) -> bool:
        return self._pinned.get(profile, 0) > 0

    def _line(self, selector: DeviceSelector) -> Line:
        line = self.lines.get(selector)
        if line is None:
            line = self.lines[selector] = Line(selector)
            if selector.serial is not None:
                self._pinned[selector.profile] = self._pinned.get(selector.profile, 0) + 1
        return line

    def _drop(self, selector: DeviceSelector) -> None:
        del self.lines[selector]
        if selector.serial is not None:
            self._pinned[selector.profile] -= 1

    def add(self, jobs: list[QueuedJob], now: float) -> None:
        """Jobs already in the order they should start, after every job queued before them
        (`now`: monotonic seconds, for a line that already waits)."""
        by_selector: dict[DeviceSelector, list[QueuedJob]] = {}
        for rank, job in enumerate(jobs, start=self._next_rank):
            job.rank = rank
            by_selector.setdefault(job.spec.selector, []).append(job)
        self._next_rank += len(jobs)
        for selector, joining in by_selector.items():
            line = self._line(selector)
            line.jobs.extend(joining)
            if line.waiting_since is not None:
                for job in joining:
                    line.joined(job, now)
        self.size += len(jobs)

    def push_front(self, job: QueuedJob, now: float) -> None:
        job.rank, self._next_retry_rank = self._next_retry_rank, self._next_retry_rank - 1
        line = self._line(job.spec.selector)
        line.jobs.appendleft(job)
        line.joined(job, now)
        self.size += 1

    def head(self, selector: DeviceSelector) -> QueuedJob | None:
        line = self.lines.get(selector)
        return line.jobs[0] if line is not None and line.jobs else None

    def pop(self, selector: DeviceSelector) -> QueuedJob:
        line = self.lines[selector]
        job = line.jobs.popleft()
        self.size -= 1
        if not line.jobs:
            self._drop(selector)
        return job

    def expire(self, selector: DeviceSelector, now: float) -> list[QueuedJob]:
        """The jobs of a waiting line past their deadline, taken out (`Line.expire`)."""
        expired = self.lines[selector].expire(now)
        self.size -= len(expired)
        return expired

    def drop_empty(self) -> None:
        for selector in [s for s, line in self.lines.items() if not line.jobs]:
            self._drop(selector)
