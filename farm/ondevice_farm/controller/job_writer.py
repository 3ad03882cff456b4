"""The fleet's job writer: each finished job's document built and written to the store where the
unit's result arrives, in threads beside the fleet's event loop (analysis must not hold up
scheduling), a bounded number at a time.

The bound is the point: a unit whose result waits for a writing slot stays busy, so results
pile up on units, never in this process, however long the night. A night of 300,000 jobs holds
at most `units + max_in_flight` results here, and the submitter none.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ondevice_farm.analysis.job import failed_document, job_document
from ondevice_farm.controller.job_context import JobContext, JobEnd, RunWriting
from ondevice_farm.controller.job_summary import JobSummary
from ondevice_farm.controller.results import ControllerResults
from ondevice_farm.errors import (
    DeviceAuthError,
    DeviceLostError,
    DeviceTimeoutError,
    FarmError,
    JobCancelledError,
    SchedulingError,
)
from ondevice_farm.inputs import with_note

log = logging.getLogger(__name__)

#: threads that build and write documents (analysis is numpy and JSON: a few keep up with 17 jobs/s)
DEFAULT_WRITER_THREADS = 2
#: results being built or written at once; more wait on their units
DEFAULT_WRITES_IN_FLIGHT = 8
#: failures that say nothing of the model's inputs: no note on its unpinned dynamic dims
_NOT_FROM_INPUTS = (SchedulingError, JobCancelledError, DeviceAuthError, DeviceLostError, DeviceTimeoutError)


class JobWriter:
    """Builds and stores each finished job of the submissions that asked for it (`RunWriting`)."""

    def __init__(
        self, threads: int = DEFAULT_WRITER_THREADS, max_in_flight: int = DEFAULT_WRITES_IN_FLIGHT
    ) -> None:
        #: per submission that asked for it, its jobs not yet written and what their documents need
        self._writings: dict[str, RunWriting] = {}
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="farm-job-writer")
        self.max_in_flight = max_in_flight
        self._slots = asyncio.Semaphore(max_in_flight)
        #: every unit result this process holds, alive (not a count kept by hand: what is freed
        #: leaves it), and the most held at once (tests check the bound; `held()`)
        self._live: dict[int, weakref.ref[Any]] = {}
        self.peak_held = 0

    def take(self, submission: str, writing: RunWriting) -> None:
        self._writings[submission] = writing

    def drop(self, submission: str) -> None:
        """The submission was cancelled: its jobs that end later are not written."""
        self._writings.pop(submission, None)

    def context(self, submission: str, job_id: str) -> JobContext | None:
        writing = self._writings.get(submission)
        return None if writing is None else writing.contexts.get(job_id)

    def claim(self, submission: str, job_id: str) -> tuple[str, JobContext] | None:
        """The run and document context of a job that has ended, if it is to be written here;
        forgotten here from now on."""
        writing = self._writings.get(submission)
        context = None if writing is None else writing.contexts.pop(job_id, None)
        if writing is None or context is None:
            return None
        if not writing.contexts:  # every job of the submission has ended
            del self._writings[submission]
        return writing.run_id, context

    def arrived(self, run: Any) -> None:
        """A unit's result reached this process (whether or not it is written here)."""
        key = id(run)  # a result is not hashable: it is known by its identity while it lives
        self._live[key] = weakref.ref(run, lambda _: self._live.pop(key, None))
        self.peak_held = max(self.peak_held, len(self._live))

    def held(self) -> dict[str, int]:
        return {
            "results": len(self._live),
            "peak_results": self.peak_held,
            "max_in_flight": self.max_in_flight,
        }

    async def admit(self) -> None:
        """Wait for a writing slot (the caller's unit stays busy meanwhile)."""
        await self._slots.acquire()

    def release(self) -> None:
        """Give back a slot `admit` took for a job that turned out to have nothing to write."""
        self._slots.release()

    async def write(
        self, results: ControllerResults, run_id: str, context: JobContext, end: JobEnd, admitted: bool
    ) -> JobSummary:
        """Build the job's document and store it; its summary once stored. Never raises for the
        job: a document that cannot be built is stored as the job's failure, a store that cannot
        take it makes the summary say so."""
        if not admitted:
            await self._slots.acquire()
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool, _write_now, results, run_id, context, end)
        except Exception as exc:  # a bug: the submitter must still hear that the job ended
            log.exception("writing job %s failed", context.base.get("job_id"))
            message = f"the controller could not write the job: {type(exc).__name__}: {exc}"
            return JobSummary.of({**context.base, "status": "failed", "error": message, "unit": end.unit})
        finally:
            self._slots.release()

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _write_now(results: ControllerResults, run_id: str, context: JobContext, end: JobEnd) -> JobSummary:
    try:
        document = document_for(context, end)
    except Exception as exc:  # a bug in analysis: the job is stored as failed, with why
        log.exception("cannot build the document of job %s", context.base.get("job_id"))
        end.run, end.error = None, FarmError(f"the controller could not analyse the result: {exc}")
        document = document_for(context, end)
    end.run = None  # the result is in the document now: free it while the store writes
    try:
        results.call("add_job", (run_id, document), {})
    except Exception as exc:
        log.error("cannot store job %s of run %s: %s", document["job_id"], run_id, exc)
        return JobSummary.of(
            {
                **document,
                "status": "failed",
                "error": f"the job ran but was not stored: {exc}",
                "error_type": type(exc).__name__,
            }
        )
    return JobSummary.of(document)


def document_for(context: JobContext, end: JobEnd) -> dict[str, Any]:
    """The job's document, as the store keeps it."""
    timing: dict[str, Any] = {
        "queued_at": end.queued_at,
        "started_at": end.started_at,
        "finished_at": end.finished_at,
        "attempts": end.attempts,
    }
    if end.started_at is not None and end.finished_at is not None:
        timing["duration_s"] = end.finished_at - end.started_at
    if end.unit is not None:
        timing["unit"] = end.unit
    merged = {**context.base, **timing}
    if end.run is None:
        error = end.error or FarmError(end.message or "the job failed")
        message = str(error)
        if context.model.shape_note and not isinstance(error, _NOT_FROM_INPUTS):
            message = with_note(message, context.model.shape_note)
        return failed_document(merged, message, type(error).__name__)
    artifact = context.artifact
    document = job_document(
        base=merged,
        target=artifact.target,
        artifact=artifact,
        run=end.run,
        reference=context.model.reference,
        tolerance=context.tolerance,
        reference_model=context.model.reference_model,
    )
    if end.run.paired is not None and end.run.generation is not None:
        # a generation job's rounds keep both sides' TTFT and decode rate, what the nightly judges
        from ondevice_farm.analysis.paired_generation import paired_rounds_document

        document["paired"] = paired_rounds_document(end.run.paired)
    return document
