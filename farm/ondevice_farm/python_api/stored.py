"""The stored runs from Python: list them, load one as a `Run`, delete some. The CLI's `farm runs`,
`farm show` and `farm report` open the store the same way (`open_run_store`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ondevice_farm.api.wire import is_api_address
from ondevice_farm.controller.results import RunStore
from ondevice_farm.errors import UsageError
from ondevice_farm.python_api.place import Farm
from ondevice_farm.python_api.values import Run
from ondevice_farm.run_reader import iter_whole_jobs, run_header
from ondevice_farm.store import ResultsStore, store_exists


@dataclass(frozen=True)
class RunInfo:
    """A line of `farm runs`: a run without its jobs."""

    run_id: str
    created_at: float
    finished_at: float | None
    kind: str
    suite: str | None
    status: str
    model: str | None
    #: jobs stored, by status
    job_counts: dict[str, int]
    #: the jobs it was planned with (None: a run stored before the farm recorded it)
    planned_jobs: int | None


@contextmanager
def open_run_store(farm: Farm) -> Iterator[RunStore]:
    """The results store for reading: with an address, the controller's (the fleet's history:
    its submit API, no Ray here, or its Ray address); else the local one, where a missing file
    is "nothing run yet", not a new file."""
    address = farm.address
    if is_api_address(address):
        from ondevice_farm.api.client import target_for
        from ondevice_farm.api.store_client import ApiStore

        assert address is not None
        yield ApiStore(target_for(address))
        return
    if address is not None:
        from ondevice_farm.controller.cluster import ClusterConfig, ray_cluster
        from ondevice_farm.controller.node_agent import find_fleet
        from ondevice_farm.controller.results import ControllerStore

        with ray_cluster(ClusterConfig(address=address)):
            yield ControllerStore(find_fleet())
        return
    location = farm.store_location
    if not store_exists(location):
        raise UsageError(f"no results store at {location} yet", hint="run `farm submit` first")
    with ResultsStore(location) as store:
        yield store


def runs(limit: int = 20, *, farm: Farm | None = None) -> list[RunInfo]:
    """Stored runs, newest first (`farm runs`)."""
    with open_run_store(farm or Farm()) as store:
        return [
            RunInfo(
                run_id=row.run_id,
                created_at=row.created_at,
                finished_at=row.finished_at,
                kind=row.kind,
                suite=row.suite,
                status=row.status,
                model=(row.document.get("model") or {}).get("name"),
                job_counts=store.job_counts(row.run_id),
                planned_jobs=planned
                if isinstance(planned := row.document.get("planned_jobs"), int)
                else None,
            )
            for row in store.runs(limit=limit)
        ]


def load_run(run_id: str = "latest", *, farm: Farm | None = None) -> Run:
    """One stored run with every job whole (an id, a unique prefix, or `latest`). A run of
    thousands of jobs is large in memory: `farm show`/`farm report` page those."""
    with open_run_store(farm or Farm()) as store:
        document = run_header(store, run_id)
        document["jobs"] = list(iter_whole_jobs(store, str(document["run_id"])))
    return Run.of(document)


def delete_runs(run_ids: Sequence[str], *, farm: Farm | None = None) -> int:
    """Delete stored runs and their jobs from the local store (ids or unique prefixes); how
    many runs went (a run still running is kept). Artifacts stay until `farm gc` finds them unused."""
    place = farm or Farm()
    if place.address is not None:
        raise UsageError(
            "runs are deleted from a controller's store by `farm gc` there, not over its address"
        )
    with open_run_store(place) as store:
        assert isinstance(store, ResultsStore)
        return store.delete_runs([store.resolve_run_id(r) for r in run_ids])
