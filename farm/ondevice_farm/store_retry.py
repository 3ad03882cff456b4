"""Writes that outlast a blink of the database: a PostgreSQL restart, a dropped connection, a
SQLite write lock held longer than its busy timeout (`farm gc` removing a month of runs).

A write is one transaction, tried again from its start, with exponential backoff, for as long as
the database stays unreachable or busy, up to `StoreRetry.outage_s`; every write is idempotent (a
job id, a run id, is written once however often its transaction is retried: a commit whose
answer was lost is found on the next try). Meanwhile the fleet's results wait on their units
(controller/job_writer.py bounds the writes in flight), so an outage costs time, not jobs, and
`StoreHealth` says so: a log line when it begins and ends, and the `farm_store_up` and
`farm_store_pending_writes` gauges.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: how long a write keeps trying while the database is unreachable or busy
DEFAULT_STORE_OUTAGE_S = 300.0
DEFAULT_FIRST_BACKOFF_S = 0.1
DEFAULT_MAX_BACKOFF_S = 5.0


@dataclass(frozen=True)
class StoreRetry:
    outage_s: float = DEFAULT_STORE_OUTAGE_S
    first_backoff_s: float = DEFAULT_FIRST_BACKOFF_S
    max_backoff_s: float = DEFAULT_MAX_BACKOFF_S

    def backoffs_s(self) -> Iterator[float]:
        wait_s = self.first_backoff_s
        while True:
            yield wait_s
            wait_s = min(wait_s * 2, self.max_backoff_s)


class StoreHealth:
    """Whether the store takes writes now, and how many wait for it: read by the metrics (a
    scrape's thread) while writers change it, so each change is under a lock."""

    def __init__(self, where: str) -> None:
        self._where = where
        self._lock = threading.Lock()
        #: writes begun and not yet done (waiting out an outage included)
        self.pending_writes = 0
        #: monotonic time since when writes fail (None: the last one went through)
        self.down_since: float | None = None
        #: transactions tried again, since the store was opened
        self.retries = 0

    @property
    def up(self) -> bool:
        return self.down_since is None

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        with self._lock:
            self.pending_writes += 1
        try:
            yield
        finally:
            with self._lock:
                self.pending_writes -= 1

    def failed(self, reason: str, outage_s: float) -> None:
        with self._lock:
            self.retries += 1
            if self.down_since is not None:
                return
            self.down_since = time.monotonic()
        log.warning(
            "results store %s does not take writes (%s); retrying for up to %.0fs",
            self._where,
            reason,
            outage_s,
        )

    def recovered(self) -> None:
        with self._lock:
            if self.down_since is None:
                return
            down_s = time.monotonic() - self.down_since
            self.down_since = None
            pending = self.pending_writes
        log.warning(
            "results store %s takes writes again after %.1fs (%d write(s) pending)",
            self._where,
            down_s,
            pending,
        )
