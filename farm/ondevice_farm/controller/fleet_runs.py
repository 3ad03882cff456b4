"""The runs the fleet records, and which of them are the controller's own.

Every submission that records a run names it here, so that the run can be marked interrupted if
its submitter vanishes. A submission handed over as the controller's (`farm nightly --address`:
a night) is more: it runs to its end whether or not anyone follows it. Its submitter may stop
following (Ctrl-C, `--detach`, a crash); the fleet then stops keeping its events, and when its
last job ends it finishes the run in the store itself. Only a cancel (`farm cancel RUN`) stops it.
A submitter that polls again after the fleet stopped answering it (cancelled by someone else, or
left behind as gone) hears why, as an error.
"""

from __future__ import annotations

from collections import OrderedDict

from ondevice_farm.errors import FarmError

#: submissions the fleet stopped answering, remembered so that a later poll says why (bounded: a
#: controller runs for months)
REMEMBERED_ENDS = 1000


class FleetRuns:
    def __init__(self) -> None:
        #: submission -> the run it records
        self._run_of: dict[str, str] = {}
        #: submission -> how many jobs of the controller's own run have not ended
        self._left: dict[str, int] = {}
        self._stopped: OrderedDict[str, FarmError] = OrderedDict()

    def recording(self, submission: str, run_id: str, jobs: int, owned: bool) -> None:
        self._run_of[submission] = run_id
        if owned:
            self._left[submission] = jobs

    def count(self) -> int:
        return len(self._run_of)

    def run_of(self, submission: str) -> str | None:
        return self._run_of.get(submission)

    def owned(self, submission: str) -> bool:
        return submission in self._left

    def submission_of(self, run_id: str) -> str | None:
        return next((s for s, r in self._run_of.items() if r == run_id), None)

    def job_ended(self, submission: str) -> str | None:
        """Count one of the submission's jobs as ended; the run's id when it was the controller's
        run's last job (the run is then the fleet's to finish, and forgotten here)."""
        if submission not in self._left:
            return None
        self._left[submission] -= 1
        if self._left[submission] > 0:
            return None
        del self._left[submission]
        return self._run_of.pop(submission, None)

    def forget(self, submission: str, because: FarmError | None = None) -> str | None:
        """The submission is cancelled or over; returns its run's id. With `because`, its
        submitter's next poll raises that."""
        self._left.pop(submission, None)
        if because is not None:
            self.stopped_answering(submission, because)
        return self._run_of.pop(submission, None)

    def stopped_answering(self, submission: str, because: FarmError) -> None:
        self._stopped[submission] = because
        while len(self._stopped) > REMEMBERED_ENDS:
            self._stopped.popitem(last=False)

    def why_stopped(self, submission: str) -> FarmError | None:
        return self._stopped.get(submission)
