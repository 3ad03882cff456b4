"""Stopping a unit's running job from another thread: the state behind `DeviceAgent.cancel`.

A job runs on the actor's job thread; a cancel arrives on another (the actor's control
thread). It marks the unit's job cancelled, so the agent's own loops stop at their next
`check`, and calls what the running job registered with `stoppable`: kill a session process,
the runner on a phone, end an app. The job then raises `JobCancelledError` instead of a result.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ondevice_farm.errors import JobCancelledError

log = logging.getLogger(__name__)


class Cancellation:
    """Per unit serial: whether its job was cancelled, and how to stop what it runs now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled: set[str] = set()
        self._stoppers: dict[str, list[Callable[[], None]]] = {}

    def begin(self, serial: str) -> None:
        """A new job on `serial`: a cancel meant for the one before no longer applies."""
        with self._lock:
            self._cancelled.discard(serial)

    def cancelled(self, serial: str) -> bool:
        with self._lock:
            return serial in self._cancelled

    def check(self, serial: str) -> None:
        """Raise `JobCancelledError` if the job on `serial` was cancelled."""
        if self.cancelled(serial):
            raise JobCancelledError(
                f"{serial}: the job was cancelled (its submission was cancelled or abandoned)"
            )

    @contextmanager
    def stoppable(self, serial: str, stop: Callable[[], None]) -> Iterator[None]:
        """While the body runs, a cancel of `serial` calls `stop`; a cancel already made calls it now."""
        with self._lock:
            self._stoppers.setdefault(serial, []).append(stop)
            already = serial in self._cancelled
        if already:
            _call(stop)
        try:
            yield
        finally:
            with self._lock:
                stoppers = self._stoppers.get(serial, [])
                if stop in stoppers:
                    stoppers.remove(stop)

    def cancel(self, serial: str) -> None:
        """Mark the job on `serial` cancelled and stop what it runs."""
        with self._lock:
            self._cancelled.add(serial)
            stoppers = list(self._stoppers.get(serial, ()))
        for stop in stoppers:
            _call(stop)


def _call(stop: Callable[[], None]) -> None:
    # a stopper races the job it stops (the process may have just exited): never let it raise
    try:
        stop()
    except Exception as exc:
        log.warning("stopping a cancelled job: %s: %s", type(exc).__name__, exc)
