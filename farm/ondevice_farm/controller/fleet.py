"""The fleet: a Ray actor that knows every unit and runs the job queue.

`farm agent` on each host registers its units (each with its `DeviceActor`); submitters
(`farm submit`, `farm nightly`) hand it jobs and long-poll for events. It is an asyncio actor:
each running job is one awaited ObjectRef, so hundreds of units cost one process.

Failures: a job whose unit disconnected (`DeviceLostError`) or whose actor or node died is
tried again on another unit of its profile, up to its `max_attempts`; every attempt is kept.
A job that no up unit can take waits with status "waiting" until its placement deadline,
then fails with a `SchedulingError`.

Results: a submission that hands over its jobs' document context (`RunWriting`) has each job
built into its document and written to the store here, as it finishes (`JobWriter`, beside the
loop); its events then carry a `JobSummary`, not the unit's result. Other submissions (`farm
compare`'s paired rounds) get the result itself in their `done` event.

Cancel: a submission cancelled (its submitter's Ctrl-C or SIGTERM, or `farm cancel RUN`) or
abandoned (no poll for `submitter_timeout_s`, and, for a submitter that is a Ray driver, Ray's
word that the driver died: a paused or slow submitter is kept, submitters.py) has its queued jobs
dropped and its running ones stopped on their units (`DeviceActor.cancel_job`, which the agent
turns into a killed process or app). A night handed over as the controller's (`farm nightly
--address`) is not abandoned with its submitter: it runs to its end and the fleet finishes its
run (fleet_runs.py). `farm serve` makes this actor detached: a controller that dies leaves it
running, and the next one adopts it (fleet_owner.py). What submitters call: fleet_submissions.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ondevice_farm.controller.fleet_events import EventBoard
from ondevice_farm.controller.fleet_events import JobEvent as JobEvent  # where submitters found it first
from ondevice_farm.controller.fleet_owner import Claim, FleetOwner
from ondevice_farm.controller.fleet_runs import FleetRuns
from ondevice_farm.controller.fleet_store import FleetStore
from ondevice_farm.controller.fleet_submissions import FleetSubmissions
from ondevice_farm.controller.job_context import JobEnd
from ondevice_farm.controller.queue import Attempt, QueuedJob, Schedule, UnitSlot
from ondevice_farm.controller.ray_errors import actor_died, is_retryable, to_farm_error
from ondevice_farm.controller.submitters import SubmitterWatch, live_drivers
from ondevice_farm.errors import FarmError, SchedulingError
from ondevice_farm_agents.base import DeviceUnit

if TYPE_CHECKING:
    from ondevice_farm.controller.job_context import JobContext
    from ondevice_farm.controller.job_writer import JobWriter

log = logging.getLogger(__name__)

FLEET_ACTOR_NAME = "fleet"
#: how often the fleet asks Ray which nodes are alive, and checks placement deadlines
DEFAULT_HEALTH_PERIOD_S = 1.0
OVERHEAD_SAMPLES = 10_000
#: a submitter that has not polled for this long is gone (killed): its queued jobs are dropped
DEFAULT_SUBMITTER_TIMEOUT_S = 30.0
#: jobs queued at once, all submissions together: a queued job costs the fleet ~1-2 kB (its
#: request is shared with its artifact's other jobs), so this bounds the queue near 2 GB
DEFAULT_MAX_QUEUED_JOBS = 1_000_000
#: how long a starting `farm serve` waits for Ray to say the fleet's owner died before refusing
CLAIM_WAIT_S = 5.0


@dataclass(frozen=True)
class UnitEntry:
    """What an agent registers: the unit, its actor, and its profile's cool-down."""

    unit: DeviceUnit
    actor: Any
    cooldown_s: float = 0.0


class FleetActorImpl(FleetSubmissions):
    """The plain class; `fleet_actor_class()` makes it an asyncio Ray actor."""

    def __init__(
        self,
        health_period_s: float = DEFAULT_HEALTH_PERIOD_S,
        submitter_timeout_s: float = DEFAULT_SUBMITTER_TIMEOUT_S,
        store_location: str | None = None,
        max_queued_jobs: int = DEFAULT_MAX_QUEUED_JOBS,
    ) -> None:
        self.schedule = Schedule()
        self.max_queued_jobs = max_queued_jobs
        #: the store this fleet writes finished jobs to and submitters write their runs to:
        #: `farm serve`'s, or an embedded submitter's own (`use_store`)
        self.store = FleetStore(store_location)
        #: the `farm serve` that owns this fleet; a new one adopts it when that one died
        self.owner = FleetOwner(store_location)
        #: the run each submission records, and the nights that are the controller's own
        self.runs = FleetRuns()
        #: builds and writes finished jobs of the submissions that hand over their contexts
        self._job_writer: JobWriter | None = None
        self.health_period_s = health_period_s
        self.submitter_timeout_s = submitter_timeout_s
        #: each submission's last poll and its submitter's Ray driver: who is gone (submitters.py)
        self.submitters = SubmitterWatch(submitter_timeout_s)
        self.events = EventBoard()
        self._wake: asyncio.Event | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: per job: seconds to issue the call; seconds from a unit's result arriving to its next job
        #: being issued (bounded: `farm serve` runs for months)
        self._send_s: deque[float] = deque(maxlen=OVERHEAD_SAMPLES)
        self._turnaround_s: deque[float] = deque(maxlen=OVERHEAD_SAMPLES)
        self._freed_at: dict[str, float] = {}

    # -- agents --------------------------------------------------------------------------

    async def register(self, node_id: str, entries: list[UnitEntry]) -> dict[str, list[str]]:
        slots = [
            UnitSlot(unit=e.unit, actor=e.actor, node_id=node_id, cooldown_s=e.cooldown_s) for e in entries
        ]
        registered = self.schedule.register(node_id, slots)
        for key in registered.added:
            log.info("unit %s is up on node %s", key, node_id[:8])
        for key in registered.gone:
            log.info("unit %s is down: no longer attached", key)
        for key in registered.dead:
            log.info("unit %s stays down: its actor died; its agent starts another", key)
        self._kick()
        return {"added": registered.added, "down": registered.gone, "dead": registered.dead}

    async def units(self) -> list[dict[str, Any]]:
        return [
            {
                "unit": s.unit,
                "node_id": s.node_id,
                "up": s.up,
                "reason": s.reason,
                "busy": s.running is not None,
                "jobs_done": s.jobs_done,
            }
            for s in self.schedule.units.values()
        ]

    async def snapshot(self) -> Any:
        from ondevice_farm.metrics.fleet_state import FleetSnapshot, UnitState

        devices = tuple(
            UnitState(device=s.unit.profile, unit=s.unit.serial, up=s.up, busy=s.running is not None)
            for s in self.schedule.units.values()
        )
        health = self.store.results.health if self.store.results is not None else None
        return FleetSnapshot(
            devices=devices,
            queue_jobs=self.schedule.pending(),
            running_jobs=len(self.schedule.running),
            store_pending_writes=health.pending_writes if health is not None else 0,
            store_writes_failing=health is not None and not health.up,
        )

    async def memory_bytes(self) -> int:
        """The fleet process's resident memory (Linux), for `farm serve` status and benchmarks."""
        import os

        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    async def dispatch_overheads_s(self) -> dict[str, list[float]]:
        """The fleet's own cost per job (benchmarks): `send` issuing the call, `turnaround` from a
        unit's result arriving to its next job being issued, while jobs were queued."""
        return {"send": list(self._send_s), "turnaround": list(self._turnaround_s)}

    async def claim(self, job_id: str, store_location: str) -> Claim:
        """`farm serve` (its Ray job `job_id`) owns this fleet from now on: at its start, or when
        it adopts the fleet of a controller that died (fleet_owner.py)."""
        from ondevice_farm.version import farm_version

        loop = asyncio.get_running_loop()
        alive = None
        waited_s = 0.0
        while self.owner.needs_liveness(job_id):
            alive = await loop.run_in_executor(None, live_drivers)
            # a controller killed a moment ago may still read as alive until Ray notices its end
            if alive is None or self.owner.job_id not in alive or waited_s >= CLAIM_WAIT_S:
                break
            await asyncio.sleep(1.0)
            waited_s += 1.0
        adopted = self.owner.claim(job_id, store_location, alive)
        if adopted:
            log.info("adopted by the controller of Ray job %s: its predecessor died", job_id)
        return Claim(
            adopted=adopted,
            version=farm_version(),
            queued_jobs=self.schedule.pending(),
            running_jobs=len(self.schedule.running),
            runs=self.runs.count(),
        )

    # -- the loop ------------------------------------------------------------------------

    def _emit(self, submission: str, event: JobEvent) -> None:
        if event.final:
            finished = self.runs.job_ended(submission)
            if finished is not None:
                task = asyncio.get_running_loop().create_task(self.store.finish_run(finished))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        self.events.emit(submission, event)

    def _kick(self) -> None:
        if self._wake is None:
            self._wake = asyncio.Event()
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.get_running_loop().create_task(self._run_loop())
        self._wake.set()

    async def _run_loop(self) -> None:
        assert self._wake is not None
        next_health = 0.0
        while True:
            now = time.monotonic()
            if now >= next_health:
                await self._check_health()
                next_health = now + self.health_period_s
            self._start_ready()
            wait_s = self.health_period_s
            cooling = self.schedule.next_wakeup(time.monotonic())
            if cooling is not None:
                wait_s = min(wait_s, cooling)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(wait_s, 0.001))

    async def _check_health(self) -> None:
        import ray

        try:
            nodes = await asyncio.get_running_loop().run_in_executor(None, ray.nodes)
        except Exception as exc:  # the GCS is briefly unreachable: try again next period
            log.warning("cannot list Ray nodes: %s", exc)
            nodes = []
        for node in nodes:
            if not node.get("Alive", True):
                for key in self.schedule.mark_node_down(node["NodeID"], "its Ray node died"):
                    log.info("unit %s is down: its node died", key)
        now = time.monotonic()
        silent = self.submitters.silent(now)
        alive = None
        if self.submitters.needs_drivers(silent):
            alive = await asyncio.get_running_loop().run_in_executor(None, live_drivers)
        for submission in self.submitters.gone(silent, alive):
            if self.runs.owned(submission):  # the controller's night: it goes on without its submitter
                await self.unfollow(submission)
                continue
            run_id = self.runs.run_of(submission)
            dropped = await self.cancel(submission)
            log.info("submission %s stopped polling: dropped or stopped its %d job(s)", submission, dropped)
            await self.store.mark_interrupted(run_id)
        placement = self.schedule.unplaceable()
        for job in placement.waiting:
            self._emit(
                job.submission,
                JobEvent(
                    job.spec.job_id,
                    "waiting",
                    queued_at=job.queued_at,
                    message=f"no unit of {job.spec.selector} is up; waiting up to "
                    f"{job.spec.placement_deadline_s:.0f}s for one",
                ),
            )
        for moved in placement.moved:
            log.info("job %s: %s", moved.job.spec.job_id, moved.message)
            self._emit(
                moved.job.submission,
                JobEvent(
                    moved.job.spec.job_id, "waiting", queued_at=moved.job.queued_at, message=moved.message
                ),
            )
        for unplaced in placement.expired:
            job = unplaced.job
            error = SchedulingError(
                unplaced.message,
                hint="the unit's agent registers it again once it is back; `farm devices` lists units"
                if unplaced.lost
                else "start `farm agent` on the host the device is attached to; `farm devices` lists units",
            )
            self._ended(
                job,
                JobEnd(
                    queued_at=job.queued_at,
                    started_at=job.attempts[0].started_at if job.attempts else None,
                    finished_at=time.time(),
                    attempts=[a.to_dict() for a in job.attempts],
                    unit=serial_of(job.attempts[-1].unit) if job.attempts else job.spec.selector.serial,
                    error=error,
                    message=str(error),
                ),
            )

    def _start_ready(self) -> None:
        for job, slot in self.schedule.assign():
            began = time.perf_counter()
            ref = slot.actor.run_job.remote(
                job.spec.request,
                job.spec.artifact_blob,
                job.spec.job_id,
                job.spec.baseline_blob,
                self._own_handle,
            )
            self._send_s.append(time.perf_counter() - began)
            freed = self._freed_at.pop(slot.key, None)
            if freed is not None and slot.cooldown_s == 0:
                self._turnaround_s.append(began - freed)
            task = asyncio.get_running_loop().create_task(self._finish(job, slot, ref, time.time()))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _finish(self, job: QueuedJob, slot: UnitSlot, ref: Any, started_at: float) -> None:
        attempt = Attempt(unit=slot.key, started_at=started_at)
        job.attempts.append(attempt)
        try:
            done = await ref
        except Exception as exc:  # what the agent raised, or the death of its actor or node
            self._freed_at.pop(slot.key, None)
            error = to_farm_error(exc)
            attempt.finished_at, attempt.error = time.time(), f"{type(error).__name__}: {error}"
            self.schedule.release(job.spec.job_id)
            if is_retryable(error):
                dead = actor_died(exc)
                self.schedule.mark_down(slot.key, str(error), actor_dead=dead)
                log.info(
                    "unit %s is down%s: %s", slot.key, " until a new actor registers" if dead else "", error
                )
            self._failed(job, error)
            self._kick()
            return
        del ref  # the result's serialized copy goes with its reference
        self.writer.arrived(done.run)
        attempt.finished_at = done.finished_at
        end = JobEnd(
            queued_at=job.queued_at,
            started_at=done.started_at,
            finished_at=done.finished_at,
            attempts=[a.to_dict() for a in job.attempts],
            unit=done.unit.serial,
            run=done.run,
        )
        del done
        context = self.writer.context(job.submission, job.spec.job_id)
        if context is not None:
            # no free writing slot: the unit waits with its result, so results never pile up here
            await self.writer.admit()
        self.schedule.release(job.spec.job_id)
        if self.schedule.pending():
            self._freed_at[slot.key] = time.perf_counter()
        self._kick()
        self._ended(job, end, admitted=context is not None)

    def _failed(self, job: QueuedJob, error: FarmError) -> None:
        attempts = [a.to_dict() for a in job.attempts]
        if is_retryable(error) and len(job.attempts) < job.spec.max_attempts:
            job.avoid.add(job.attempts[-1].unit)
            self.schedule.requeue(job)
            self._emit(
                job.submission,
                JobEvent(
                    job.spec.job_id,
                    "retrying",
                    message=f"{error}; trying another unit",
                    unit=job.attempts[-1].unit,
                    error=error,
                    attempts=attempts,
                    queued_at=job.queued_at,
                ),
            )
            return
        if is_retryable(error):
            error = type(error)(f"{error} (gave up after {len(job.attempts)} attempt(s))", hint=error.hint)
        self._ended(
            job,
            JobEnd(
                queued_at=job.queued_at,
                started_at=job.attempts[0].started_at,
                finished_at=time.time(),
                attempts=attempts,
                unit=serial_of(job.attempts[-1].unit),
                error=error,
                message=str(error),
            ),
        )

    # -- a job's end -----------------------------------------------------------------------

    def _ended(self, job: QueuedJob, end: JobEnd, admitted: bool = False) -> None:
        """The job's final event: at once for a job its submitter writes, once written otherwise
        (the write runs beside the loop; `admitted`: its writing slot is already held)."""
        claimed = self.writer.claim(job.submission, job.spec.job_id)
        if claimed is None:
            if admitted:
                self.writer.release()
            self._emit(job.submission, JobEvent.ended(job.spec.job_id, end))
            return
        task = asyncio.get_running_loop().create_task(self._write(job, *claimed, end, admitted))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(
        self, job: QueuedJob, run_id: str, context: JobContext, end: JobEnd, admitted: bool
    ) -> None:
        assert self.store.results is not None  # `submit` refused the writing otherwise
        summary = await self.writer.write(self.store.results, run_id, context, end, admitted=admitted)
        self._emit(job.submission, JobEvent.ended(job.spec.job_id, end, summary))


def serial_of(unit_key: str) -> str:
    """A unit's serial from its key (`pixel8:SERIAL`, as attempts name it): what a job's `unit` is."""
    return unit_key.partition(":")[2] or unit_key


def fleet_actor_class() -> Any:
    """The fleet as a Ray actor class; `farm serve` names it and makes it detached
    (fleet_owner.py), an embedded submitter's lives and dies with it."""
    import ray

    options: dict[str, Any] = {"num_cpus": 0, "max_restarts": 0, "max_concurrency": 1000}
    return ray.remote(**options)(FleetActorImpl)
