"""One stored run read whole, from whichever store holds it: the farm directory's, the
controller's through Ray, or the fleet's over the submit API. Below the CLI and the reports, which
both read runs."""

from __future__ import annotations

from typing import Any, Protocol

from ondevice_farm.errors import UsageError
from ondevice_farm.store import RunRow

#: the run id that names the newest stored run
LATEST_RUN = "latest"


class RunReader(Protocol):
    def runs(self, limit: int = 50) -> list[RunRow]: ...
    def run(self, run_id: str) -> RunRow: ...
    def resolve_run_id(self, prefix: str) -> str: ...
    def jobs(self, run_id: str) -> list[dict[str, Any]]: ...


def resolve_run(store: RunReader, run_id: str) -> str:
    """A run id, a unique prefix of one, or `latest`."""
    if run_id == LATEST_RUN:
        newest = store.runs(limit=1)
        if not newest:
            raise UsageError("no runs stored yet", hint="run `farm submit` first")
        return newest[0].run_id
    return store.resolve_run_id(run_id)


def load_run(store: RunReader, run_id: str) -> dict[str, Any]:
    row = store.run(resolve_run(store, run_id))
    document = dict(row.document)
    document.update(
        status=row.status, created_at=row.created_at, finished_at=row.finished_at, jobs=store.jobs(row.run_id)
    )
    return document
