"""Which `farm serve` owns the fleet, and whether a starting one may take it over.

`farm serve` makes the fleet a detached, named Ray actor: it does not die with the process that
made it. A controller killed mid-night (`kill -9`, OOM, a crash) leaves the fleet running its
queue, its units' jobs and its writes to the store, and its submitters polling it; the next
`farm serve` on that cluster adopts it, and the night goes on as if nothing happened. A second
`farm serve` while the owner lives is refused. A stopped `farm serve` (Ctrl-C, SIGTERM) ends the
fleet itself: a deliberate stop stops the controller.
"""

from __future__ import annotations

from dataclasses import dataclass

from ondevice_farm.errors import SchedulingError


@dataclass(frozen=True)
class Claim:
    """What a starting `farm serve` learns from the fleet it claimed."""

    #: the fleet was already running, left by a controller that died: its work goes on
    adopted: bool
    #: the farm version the fleet runs (an adopted fleet keeps the code it was started with)
    version: str
    queued_jobs: int = 0
    running_jobs: int = 0
    #: runs being recorded (nights, followed or not, and ad-hoc submissions)
    runs: int = 0


class FleetOwner:
    """The Ray job (driver) of the `farm serve` that owns the fleet, and the store it writes."""

    def __init__(self, store_location: str | None) -> None:
        self.store_location = store_location
        self.job_id: str | None = None

    def needs_liveness(self, job_id: str) -> bool:
        """Whether taking over for `job_id` needs Ray's word on the current owner."""
        return self.job_id is not None and self.job_id != job_id

    def claim(self, job_id: str, store_location: str, alive: set[str] | None) -> bool:
        """Make `job_id` the owner; True when it takes over from a dead one (`alive`: the Ray
        drivers alive now, None when Ray cannot say)."""
        if store_location != self.store_location:
            raise SchedulingError(
                f"the farm controller running on this cluster writes to {self.store_location}, "
                f"not {store_location}",
                hint="start `farm serve` with that --store, or stop the running controller first",
            )
        if self.job_id is not None and self.job_id != job_id and (alive is None or self.job_id in alive):
            raise SchedulingError(
                f"a farm controller is already running on this cluster (Ray job {self.job_id})",
                hint="stop the other `farm serve` first",
            )
        adopted = self.job_id is not None and self.job_id != job_id
        self.job_id = job_id
        return adopted
