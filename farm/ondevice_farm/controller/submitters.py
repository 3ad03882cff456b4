"""Whether a submission's submitter is still there.

A submitter long-polls the fleet for its events; one that stops polling may be dead (killed:
its queued jobs must go) or only slow (paused, swapped out, behind a backlog of events, a
network blip). Silence alone cannot tell them apart, so for a submitter that is a Ray driver
the fleet asks Ray: while the driver's job is alive in Ray's job table, the submission is kept
however long it is silent (its jobs go on running and being stored; its events wait for it),
and once Ray says the driver is dead, it is cancelled. A submitter Ray does not know (none was
named, or Ray cannot say) is judged by silence alone, as before.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def live_drivers() -> set[str] | None:
    """The job ids (hex) of the Ray drivers alive now; None when Ray cannot say. Blocking: one
    read of the GCS job table (call it off the event loop)."""
    try:
        # no public API says whether a driver is alive (ray 2.60); `ray list jobs` reads the same
        import ray._private.state as ray_state

        jobs: list[dict[str, Any]] = ray_state.jobs()  # type: ignore[no-untyped-call]
        return {str(job["JobID"]) for job in jobs if not job.get("IsDead", True)}
    except Exception as exc:  # a Ray without this table, or the GCS briefly away: silence decides
        log.warning("cannot read Ray's job table (%s): silent submitters are judged by silence", exc)
        return None


class SubmitterWatch:
    """Each open submission's last poll and, where known, its submitter's Ray driver."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        #: monotonic time of each submission's last poll (plus the poll's own wait)
        self._last_poll: dict[str, float] = {}
        self._driver: dict[str, str] = {}
        self._kept: set[str] = set()

    def opened(self, submission: str, now: float, driver_job_id: str | None = None) -> None:
        self._last_poll[submission] = now
        if driver_job_id:
            self._driver[submission] = driver_job_id

    def polled(self, submission: str, until: float) -> None:
        self._last_poll[submission] = until
        if submission in self._kept:
            self._kept.discard(submission)
            log.info("submission %s polls again", submission)

    def closed(self, submission: str) -> None:
        self._last_poll.pop(submission, None)
        self._driver.pop(submission, None)
        self._kept.discard(submission)

    def silent(self, now: float) -> list[str]:
        return [s for s, t in self._last_poll.items() if now - t > self.timeout_s]

    def needs_drivers(self, silent: list[str]) -> bool:
        return any(s in self._driver for s in silent)

    def gone(self, silent: list[str], alive: set[str] | None) -> list[str]:
        """Of the silent submissions, those whose submitter is gone: its driver dead in Ray's
        job table, or, where Ray cannot say, silent past the timeout."""
        gone = []
        for submission in silent:
            driver = self._driver.get(submission)
            if driver is not None and alive is not None and driver in alive:
                if submission not in self._kept:
                    self._kept.add(submission)
                    log.info(
                        "submission %s has not polled for %.0fs, but its driver (Ray job %s) is alive: kept",
                        submission, self.timeout_s, driver,
                    )  # fmt: skip
                continue
            gone.append(submission)
        return gone
