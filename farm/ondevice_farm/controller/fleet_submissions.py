"""The fleet's side of its submitters: a submission queued, polled for its events, followed or
not, cancelled by its submitter or by `farm cancel`; the results store they share.

A mixin of `FleetActorImpl` (fleet.py): a Ray actor's methods are its class's, and these are
the ones a submitter calls.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from ondevice_farm.controller.fleet_events import EventBoard, JobEvent
from ondevice_farm.controller.fleet_runs import FleetRuns
from ondevice_farm.controller.fleet_store import FleetStore
from ondevice_farm.controller.queue import JobSpec, Schedule
from ondevice_farm.controller.submitters import SubmitterWatch
from ondevice_farm.errors import FarmError, JobCancelledError, SchedulingError

if TYPE_CHECKING:
    from ondevice_farm.controller.job_context import RunWriting
    from ondevice_farm.controller.job_writer import JobWriter

log = logging.getLogger(__name__)


class FleetSubmissions(ABC):
    """What the fleet actor (fleet.py) has that these calls use: its state, and its loop's
    `_kick` and `_emit`."""

    schedule: Schedule
    max_queued_jobs: int
    store: FleetStore
    runs: FleetRuns
    submitters: SubmitterWatch
    events: EventBoard
    _job_writer: JobWriter | None
    _tasks: set[asyncio.Task[None]]

    @abstractmethod
    def _kick(self) -> None:
        """Wake the fleet's loop: jobs to start."""

    @abstractmethod
    def _emit(self, submission: str, event: JobEvent) -> None:
        """Hand the submission's submitter an event."""

    async def use_store(self, location: str) -> list[str]:
        """An embedded fleet's store: its submitter's own (`farm serve` names its store at start).
        Like a starting `farm serve`, marks the runs dead controllers of this host left running;
        returns their ids."""
        return self.store.use(location)

    async def store_call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A submitter's read or write of the controller's store (`ondevice_farm.controller.results`)."""
        return await self.store.call(method, args, kwargs)

    @property
    def writer(self) -> JobWriter:
        if self._job_writer is None:  # made on the actor's loop: its semaphore belongs there
            from ondevice_farm.controller.job_writer import JobWriter

            self._job_writer = JobWriter()
        return self._job_writer

    async def held_results(self) -> dict[str, int]:
        """Units' results alive in this process now and at most so far (tests of the bound)."""
        return self.writer.held()

    async def submit(
        self,
        submission: str,
        specs: list[JobSpec],
        run_id: str | None = None,
        writing: RunWriting | None = None,
        driver_job_id: str | None = None,
        owned: bool = False,
        followed: bool = True,
    ) -> None:
        """Queue `specs`; with `writing`, each job is written to the store here as it finishes;
        `driver_job_id`: the submitter's Ray job, asked after when it falls silent; `owned`: the
        run is the controller's, run to its end whoever follows it (fleet_runs.py); `followed`:
        false when no submitter polls for its events (`farm nightly --detach`)."""
        if (owned or not followed) and (writing is None or run_id is None):
            raise SchedulingError("only a run whose jobs the controller writes can go on unfollowed")
        queued = self.schedule.pending()
        if queued + len(specs) > self.max_queued_jobs:
            raise SchedulingError(
                f"a submission of {len(specs):,} jobs: this controller queues at most "
                f"{self.max_queued_jobs:,} at once ({queued:,} queued now)",
                hint="split the suite into smaller nightlies, or wait for the queue to drain",
            )
        if writing is not None:
            if self.store.results is None:
                raise SchedulingError("this controller keeps no results store to write the jobs to")
            self.writer.take(submission, writing)
        if run_id is not None:
            self.runs.recording(submission, run_id, len(specs), owned or not followed)
        if followed:
            self.events.open(submission)
            self.submitters.opened(submission, time.monotonic(), driver_job_id)
        self.schedule.enqueue(submission, specs)
        self._kick()

    @functools.cached_property
    def _own_handle(self) -> Any:
        """This fleet as a Ray actor handle, for a DeviceActor to report progress to (None when
        the fleet runs outside an actor, as some tests run it); looked up once, not per job."""
        import ray

        try:
            return ray.get_runtime_context().current_actor
        except Exception:
            return None

    async def job_progress(self, job_id: str, message: str) -> None:
        """A running job's word on how it goes (a paired job's rounds): a `progress` event."""
        entry = self.schedule.running.get(job_id)
        if entry is not None:
            job, slot = entry
            self._emit(job.submission, JobEvent(job_id, "progress", message=message, unit=slot.key))

    async def poll(self, submission: str, timeout_s: float) -> list[JobEvent]:
        """The submission's events since the last poll; waits up to `timeout_s` for one. Raises why
        the fleet stopped answering it: cancelled by someone else (`farm cancel`), or left behind
        as gone."""
        self.submitters.polled(submission, time.monotonic() + timeout_s)
        events = await self.events.take(submission, timeout_s)
        why = self.runs.why_stopped(submission)
        if why is not None:
            raise why
        return events

    async def unfollow(self, submission: str) -> None:
        """Its submitter stops following a run that is the controller's: the run goes on, its
        events are no longer kept (any other submission: cancelled, as a gone submitter's is)."""
        if not self.runs.owned(submission):
            await self.cancel(submission)
            return
        run_id = self.runs.run_of(submission)
        self.submitters.closed(submission)
        self.events.close(submission)
        self.runs.stopped_answering(
            submission,
            SchedulingError(
                f"the controller stopped keeping the events of run {run_id} (its submitter was silent "
                "past the submitter timeout); the night goes on",
                hint=f"`farm nightly SUITE --follow {run_id}` follows it to its end",
            ),
        )
        log.info("run %s goes on unfollowed", run_id)

    async def cancel_run(self, run_id: str) -> int:
        """`farm cancel RUN`: its submission cancelled, the run marked interrupted; how many jobs
        it had left."""
        submission = self.runs.submission_of(run_id)
        if submission is None:
            raise SchedulingError(
                f"run {run_id} has no jobs on this controller", hint="`farm runs` shows each run's status"
            )
        cancelled = JobCancelledError(
            f"run {run_id} was cancelled (`farm cancel`)",
            hint="its complete jobs are in the store; `farm show RUN` lists them",
        )
        left = await self.cancel(submission, because=cancelled)
        await self.store.mark_interrupted(run_id)
        log.info("run %s cancelled: %d job(s) dropped or stopped", run_id, left)
        return left

    async def cancel(self, submission: str, because: FarmError | None = None) -> int:
        """Drop the submission's queued jobs and stop its running ones; how many jobs it had left
        (`because`: what its follower hears, when someone else cancels it)."""
        self.runs.forget(submission, because)
        self.writer.drop(submission)
        dropped = self.schedule.cancel(submission)
        stopping = self._stop_running(submission)
        self.submitters.closed(submission)
        self.events.close(submission)
        return len(dropped) + stopping

    def _stop_running(self, submission: str) -> int:
        """Ask each unit running one of the submission's jobs to stop it; the job's own `_finish`
        frees the unit once the agent has stopped (the cancel is not awaited here: a phone may
        take a few seconds to answer, and the submitter waits for this call)."""
        from ondevice_farm.controller.actor import CONTROL_GROUP

        running = [
            (job, slot) for job, slot in self.schedule.running.values() if job.submission == submission
        ]
        for job, slot in running:
            try:
                ref = slot.actor.cancel_job.options(concurrency_group=CONTROL_GROUP).remote(job.spec.job_id)
            except Exception as exc:  # an actor that died meanwhile: its job ends with it
                log.warning("cannot stop job %s on %s: %s", job.spec.job_id, slot.key, exc)
                continue
            task = asyncio.get_running_loop().create_task(self._await_stop(job.spec.job_id, slot.key, ref))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(running)

    @staticmethod
    async def _await_stop(job_id: str, unit: str, ref: Any) -> None:
        try:
            stopped = await ref
        except Exception as exc:
            log.warning("stopping job %s on %s failed: %s", job_id, unit, exc)
            return
        log.info("job %s on %s: %s", job_id, unit, "stopped" if stopped else "had already ended")
