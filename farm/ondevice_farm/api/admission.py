"""How much the submit API takes on at once: submissions streaming, connections open, compiles.

Twenty submitters at once must not mean twenty compiles on the controller's cores, nor a thread
per request without end. A submission beyond `max_submissions`, or a connection beyond
`max_connections` (answered on the listening thread, no thread started for it), gets `429 Too
Many Requests` with `Retry-After`; the submitter waits that long and asks again. An admitted
submission compiles (and computes its reference) only with one of `max_compiles` slots; while
it waits for one its submitter hears so.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from ondevice_farm.errors import JobCancelledError

#: submissions streaming at once (most of a submission's life is waiting for its jobs: cheap)
DEFAULT_MAX_SUBMISSIONS = 32
#: connections served at once (submissions, uploads, store reads), each on a thread of its own
DEFAULT_MAX_CONNECTIONS = 64
#: compiles (with host references) at once: CPU work, on the controller's cores
DEFAULT_MAX_COMPILES = 2
#: what a refused submitter is told to wait before it asks again
DEFAULT_RETRY_AFTER_S = 5
#: how often a submission waiting for a compile slot checks that its submitter is still there
SLOT_CHECK_S = 0.25


@dataclass(frozen=True)
class ApiLimits:
    max_submissions: int = DEFAULT_MAX_SUBMISSIONS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    retry_after_s: int = DEFAULT_RETRY_AFTER_S


DEFAULT_API_LIMITS = ApiLimits()


class Stages(Protocol):
    def stage(self, text: str) -> None: ...


class CompileSlots:
    """The controller's compile slots, shared by every submission of the API."""

    def __init__(self, slots: int = DEFAULT_MAX_COMPILES) -> None:
        self.slots = slots
        self._free = threading.Semaphore(slots)
        self._lock = threading.Lock()
        self.waiting = 0

    @contextlib.contextmanager
    def held(self, progress: Stages, stop: threading.Event) -> Iterator[None]:
        """One slot for the block; waits for it (saying so) unless the submitter leaves first."""
        if not self._free.acquire(blocking=False):
            with self._lock:
                self.waiting += 1
                ahead = self.waiting
            progress.stage(f"waiting for a compile slot ({self.slots} busy, {ahead} waiting)")
            try:
                while not self._free.acquire(timeout=SLOT_CHECK_S):
                    if stop.is_set():
                        raise JobCancelledError("the submission was cancelled: its submitter went away")
            finally:
                with self._lock:
                    self.waiting -= 1
        try:
            yield
        finally:
            self._free.release()
