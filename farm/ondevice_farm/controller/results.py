"""The controller owns the results: with `--address`, a submitter's runs and jobs go to `farm
serve`'s store through the fleet actor, and `farm runs/show/report/nightly --address` read it
back the same way. The fleet's history is then one store, whichever host submitted.

`ControllerResults` lives in the fleet actor, beside the store `farm serve` named;
`ControllerStore` is its stand-in in a submitter, with the store methods a run needs.
"""

from __future__ import annotations

import os
import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from ondevice_farm.errors import FarmError, SchedulingError
from ondevice_farm.store import DEFAULT_PAGE_JOBS, ResultsStore, RunRow, StoreLocation
from ondevice_farm.store_retry import StoreHealth

#: the store methods a submitter may call through the controller: what recording a run, reading
#: runs back and a nightly's baseline need, and nothing that deletes
REMOTE_METHODS = frozenset(
    {
        "start_run",
        "add_job",
        "finish_run",
        "mark_interrupted",
        "runs",
        "run",
        "resolve_run_id",
        "jobs",
        "job_counts",
        "run_job_summaries",
        "run_job_rows",
        "job",
    }
)
DEFAULT_CALL_TIMEOUT_S = 60.0
T = TypeVar("T")


class RunStore(Protocol):
    """What recording and reading a run needs of a store, local or the controller's."""

    def start_run(
        self, run_id: str, kind: str, document: dict[str, Any], suite: str | None = None
    ) -> None: ...
    def add_job(self, run_id: str, job: dict[str, Any]) -> None: ...
    def finish_run(self, run_id: str, status: str) -> None: ...
    def mark_interrupted(self, run_id: str) -> bool: ...
    def runs(self, limit: int = 50, kind: str | None = None, suite: str | None = None) -> list[RunRow]: ...
    def run(self, run_id: str) -> RunRow: ...
    def resolve_run_id(self, prefix: str) -> str: ...
    def jobs(self, run_id: str) -> list[dict[str, Any]]: ...
    def job_counts(self, run_id: str) -> dict[str, int]: ...
    def run_job_summaries(
        self, run_id: str, *, after: tuple[float, str] | None = None, limit: int = DEFAULT_PAGE_JOBS
    ) -> list[dict[str, Any]]: ...
    def run_job_rows(
        self, run_id: str, *, after: tuple[float, str] | None = None, limit: int = DEFAULT_PAGE_JOBS
    ) -> list[dict[str, Any]]: ...
    def job(self, job_id: str, *, parts: tuple[str, ...] | None = None) -> dict[str, Any]: ...


class ControllerResults:
    """The controller's side: one store, one writer at a time (the actor serves many submitters
    from one event loop's worker threads)."""

    def __init__(self, location: StoreLocation) -> None:
        self.location = location
        self._lock = threading.Lock()
        self._store = ResultsStore(location)

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if method not in REMOTE_METHODS:
            raise SchedulingError(f"the controller's store has no method {method!r}")
        if method == "start_run":
            # The run is the controller's now: a restarted `farm serve` finds it "running" under
            # this (dead) process and marks it interrupted. The submitter is kept for the record.
            run_id, kind, document = args[:3]
            submitter = document.get("controller")
            document = {**document, "controller": controller_identity(), "submitter": submitter}
            args = (run_id, kind, document, *args[3:])
        with self._lock:
            return getattr(self._store, method)(*args, **kwargs)

    @property
    def health(self) -> StoreHealth:
        """Whether the store takes writes now (read without the lock: a scrape must not wait for
        a write that waits out an outage)."""
        return self._store.health

    def locked(self, work: Callable[[ResultsStore], T]) -> T:
        """`work` on the store itself, alone (what the controller does beyond a submitter's calls)."""
        with self._lock:
            return work(self._store)

    def close(self) -> None:
        with self._lock:
            self._store.close()


def controller_identity() -> dict[str, Any]:
    """Who owns a run while it is written: a restarted controller marks a dead owner's runs."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


class ForwardedStore(ABC):
    """The store methods a run needs, each one `_call` to a store elsewhere: the controller's,
    through Ray (`ControllerStore`) or over its submit API (`ondevice_farm.api.store_client`)."""

    path: str

    @abstractmethod
    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call `method` on the store elsewhere and return its result."""

    def start_run(self, run_id: str, kind: str, document: dict[str, Any], suite: str | None = None) -> None:
        self._call("start_run", run_id, kind, document, suite=suite)

    def add_job(self, run_id: str, job: dict[str, Any]) -> None:
        self._call("add_job", run_id, job)

    def finish_run(self, run_id: str, status: str) -> None:
        self._call("finish_run", run_id, status)

    def mark_interrupted(self, run_id: str) -> bool:
        return bool(self._call("mark_interrupted", run_id))

    def runs(self, limit: int = 50, kind: str | None = None, suite: str | None = None) -> list[RunRow]:
        result: list[RunRow] = self._call("runs", limit=limit, kind=kind, suite=suite)
        return result

    def run(self, run_id: str) -> RunRow:
        result: RunRow = self._call("run", run_id)
        return result

    def resolve_run_id(self, prefix: str) -> str:
        return str(self._call("resolve_run_id", prefix))

    def jobs(self, run_id: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("jobs", run_id)
        return result

    def job_counts(self, run_id: str) -> dict[str, int]:
        result: dict[str, int] = self._call("job_counts", run_id)
        return result

    def run_job_summaries(
        self, run_id: str, *, after: tuple[float, str] | None = None, limit: int = DEFAULT_PAGE_JOBS
    ) -> list[dict[str, Any]]:
        """One page of the run's job summaries: one call, so a large run comes back a page a call."""
        cursor = None if after is None else [float(after[0]), str(after[1])]
        result: list[dict[str, Any]] = self._call("run_job_summaries", run_id, after=cursor, limit=limit)
        return result

    def run_job_rows(
        self, run_id: str, *, after: tuple[float, str] | None = None, limit: int = DEFAULT_PAGE_JOBS
    ) -> list[dict[str, Any]]:
        """One page of the run's jobs as their columns (`ResultsStore.run_job_rows`): no document
        is parsed, pickled or encoded on the way, so a page of a 30,000-job run is cheap."""
        cursor = None if after is None else [float(after[0]), str(after[1])]
        result: list[dict[str, Any]] = self._call("run_job_rows", run_id, after=cursor, limit=limit)
        return result

    def job(self, job_id: str, *, parts: tuple[str, ...] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self._call("job", job_id, parts=None if parts is None else list(parts))
        return result


class ControllerStore(ForwardedStore):
    """A submitter's stand-in for the controller's store: each call is one round trip."""

    def __init__(self, fleet: Any, timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> None:
        self.fleet = fleet
        self.timeout_s = timeout_s
        self.path = "the controller's store"

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        import ray

        try:
            return ray.get(self.fleet.store_call.remote(method, args, kwargs), timeout=self.timeout_s)
        except FarmError:
            raise
        except Exception as exc:
            from ray.exceptions import RayTaskError

            from ondevice_farm.controller.ray_errors import to_farm_error

            if isinstance(exc, RayTaskError) and isinstance(exc.cause, FarmError):
                raise exc.cause from None  # the store's own error (no such run, ...), as raised
            error = to_farm_error(exc)
            raise SchedulingError(
                f"lost the farm controller: {error}",
                hint="its store keeps the jobs it wrote; restart `farm serve` (it marks this run "
                "interrupted) and resubmit",
            ) from None

    def close(self) -> None:
        pass

    def __enter__(self) -> ControllerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def run_store(embedded: bool, fleet: Any, location: StoreLocation) -> Iterator[RunStore]:
    """Where a submission's results go: the fleet's store, which the fleet writes each job to as
    it finishes. Embedded, the fleet is this submitter's own and its store the local one at
    `location`: one path either way (the submitter holds no job's document). A fleet that runs in
    this process (`fleet` None: tests' stand-ins without Ray) leaves the store to the submitter."""
    if embedded and fleet is None:
        with ResultsStore(location) as store:
            yield store
        return
    if embedded:
        import ray

        ray.get(fleet.use_store.remote(str(location)))
    yield ControllerStore(fleet)
