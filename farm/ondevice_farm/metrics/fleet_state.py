"""What the controller knows about the fleet right now, as the metrics exporter reads it.

The store holds finished jobs; whether a unit is attached, healthy or running a job, and how
many jobs wait, only the live controller (`farm serve`) knows. It hands the exporter a
`FleetStateSource`; the exporter calls `snapshot()` once per scrape, so an implementation must
be cheap (no device round trips) and thread-safe (scrapes arrive on the HTTP server's thread).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class UnitState:
    """One attached unit as the controller sees it."""

    #: the device profile name (`device_profiles/<name>.yaml`), the `device` label everywhere
    device: str
    #: the unit's serial (adb serial, UDID, hostname): the `unit` label, bounded by the fleet size
    unit: str
    #: attached and answering its last health check
    up: bool
    #: running a job now
    busy: bool = False
    #: the last temperature the unit reported, when its platform reports one
    temperature_c: float | None = None


@dataclass(frozen=True)
class FleetSnapshot:
    """The fleet at one instant: every known unit, and the jobs waiting for one."""

    devices: tuple[UnitState, ...] = ()
    #: jobs submitted and not yet started on any unit
    queue_jobs: int = 0
    #: jobs started and not yet finished
    running_jobs: int = 0
    #: finished jobs the controller is writing to its store now, or waiting to (store_retry.py)
    store_pending_writes: int = 0
    #: the controller's writes to its store fail now and are being retried (an outage)
    store_writes_failing: bool = False


class FleetStateSource(Protocol):
    """Implemented by the controller that `farm serve` runs; read at every scrape."""

    def snapshot(self) -> FleetSnapshot: ...
