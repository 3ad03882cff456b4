"""One stored run read from whichever store holds it (the farm directory's, the controller's
through Ray, or the fleet's over the submit API) in bounded memory: its job summaries a page at a
time, and whole jobs (with their bulky parts, job_parts.BULKY_JOB_KEYS) only for the few that a
view shows in detail. Below the CLI and the reports, which both read runs."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ondevice_farm.errors import UsageError
from ondevice_farm.store import RunRow

#: the run id that names the newest stored run
LATEST_RUN = "latest"
#: job summaries read per store call (one page in memory at a time)
DEFAULT_PAGE_JOBS = 1000
#: jobs a report or `farm show` shows in detail (a column, an op table): the rest of a large run
#: is in its per-(model, target) table; `--jobs` / `--offset` (or `?offset=` on /runs/) move the window
DEFAULT_DETAIL_JOBS = 100
#: the bulky parts a detailed job is read with: its op table and node placement (not the trace,
#: which only `--trace` writes)
DETAIL_PARTS: tuple[str, ...] = ("ops", "compile.node_placement")


class RunReader(Protocol):
    def runs(self, limit: int = 50) -> list[RunRow]: ...
    def run(self, run_id: str) -> RunRow: ...
    def resolve_run_id(self, prefix: str) -> str: ...
    def run_job_summaries(
        self, run_id: str, *, after: tuple[float, str] | None = None, limit: int = DEFAULT_PAGE_JOBS
    ) -> list[dict[str, Any]]: ...
    def run_job_rows(
        self, run_id: str, *, after: tuple[float, str] | None = None, limit: int = DEFAULT_PAGE_JOBS
    ) -> list[dict[str, Any]]: ...
    def job(self, job_id: str, *, parts: tuple[str, ...] | None = None) -> dict[str, Any]: ...


def resolve_run(store: RunReader, run_id: str) -> str:
    """A run id, a unique prefix of one, or `latest`."""
    if run_id == LATEST_RUN:
        newest = store.runs(limit=1)
        if not newest:
            raise UsageError("no runs stored yet", hint="run `farm submit` first")
        return newest[0].run_id
    return store.resolve_run_id(run_id)


def iter_job_summaries(
    store: RunReader, run_id: str, page: int = DEFAULT_PAGE_JOBS, columns_only: bool = False
) -> Iterator[dict[str, Any]]:
    """Every job summary of the run by (finished_at, job_id), one page (one store call) at a time;
    `columns_only`: each job as its summary columns (`RunReader.run_job_rows`), no document."""
    after: tuple[float, str] | None = None
    read = store.run_job_rows if columns_only else store.run_job_summaries
    while True:
        rows = read(run_id, after=after, limit=page)
        last_page = len(rows) < page
        if rows:
            after = (float(rows[-1]["finished_at"]), str(rows[-1]["job_id"]))
        # handed out by popping, so the page is let go before the next one is read (else two
        # pages are alive at once, and the peak doubles)
        rows.reverse()
        while rows:
            yield rows.pop()
        if last_page:
            return


def iter_whole_jobs(
    store: RunReader, run_id: str, parts: tuple[str, ...] | None = None
) -> Iterator[dict[str, Any]]:
    """Every job of the run, each read whole (or with `parts`) as its summary comes: one document
    in memory at a time, one store call per job."""
    for summary in iter_job_summaries(store, run_id):
        yield store.job(str(summary["job_id"]), parts=parts)


def run_header(store: RunReader, run_id: str) -> dict[str, Any]:
    """The run's own document (model, settings, ...) with its state, without its jobs."""
    row = store.run(resolve_run(store, run_id))
    document = dict(row.document)
    document.update(status=row.status, created_at=row.created_at, finished_at=row.finished_at)
    document["run_id"] = row.run_id
    return document


@dataclass
class JobGroup:
    """The jobs of one (model, target) of a run, summed up from their summaries."""

    model: str
    target: str
    jobs: int = 0
    ok: int = 0
    devices: int = 0
    p50s_ms: list[float] | None = None
    first_failure: str | None = None

    def to_dict(self) -> dict[str, Any]:
        p50s = self.p50s_ms or []
        return {
            "model": self.model,
            "target": self.target,
            "jobs": self.jobs,
            "ok": self.ok,
            "failed": self.jobs - self.ok,
            "devices": self.devices,
            "p50_ms": {
                "median": statistics.median(p50s) if p50s else None,
                "min": min(p50s) if p50s else None,
                "max": max(p50s) if p50s else None,
            },
            "first_failure": self.first_failure,
        }


class GroupTable:
    """Per (model, target) counts and p50s, added to one summary at a time: its size is the
    suite's (models x targets) and the jobs' p50s, never their documents."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], JobGroup] = {}
        self._devices: dict[tuple[str, str], set[str]] = {}

    def add(self, job: dict[str, Any]) -> None:
        model = str((job.get("model") or {}).get("name") or "?")
        key = (model, str(job.get("target") or "?"))
        group = self._groups.setdefault(key, JobGroup(model, key[1], p50s_ms=[]))
        devices = self._devices.setdefault(key, set())
        devices.add(str(job.get("requested") or job.get("device")))
        group.jobs += 1
        group.devices = len(devices)
        if job.get("status") == "ok":
            group.ok += 1
            p50 = (job.get("latency_ms") or {}).get("p50")
            if isinstance(p50, int | float) and group.p50s_ms is not None:
                group.p50s_ms.append(float(p50))
        elif group.first_failure is None:
            group.first_failure = f"{job.get('device')}: {job.get('error') or job.get('status')}"

    def rows(self) -> list[dict[str, Any]]:
        return [self._groups[key].to_dict() for key in sorted(self._groups)]


def load_run(
    store: RunReader,
    run_id: str,
    *,
    detail_jobs: int | None = DEFAULT_DETAIL_JOBS,
    offset: int = 0,
    parts: tuple[str, ...] = DETAIL_PARTS,
) -> dict[str, Any]:
    """The run document with `jobs`: the `detail_jobs` jobs from `offset` (by finished_at, job_id),
    each its summary with `parts`; `jobs_total`, `jobs_offset`, and `job_groups`, the per-(model,
    target) table of every job. The table reads the jobs' columns a page at a time (no document is
    parsed for it: through `farm serve` that was ~4 s per 1,000 jobs), and only the window's jobs
    are read whole, so memory holds a page, the window and the table, whatever the run's size.
    `detail_jobs=None`: every job in the window."""
    document = run_header(store, run_id)
    groups = GroupTable()
    window: list[dict[str, Any]] = []
    total = 0
    for row in iter_job_summaries(store, document["run_id"], columns_only=True):
        groups.add(row)
        if total >= offset and (detail_jobs is None or len(window) < detail_jobs):
            window.append(store.job(str(row["job_id"]), parts=parts or ()))
        total += 1
    document.update(jobs=window, jobs_total=total, jobs_offset=offset, job_groups=groups.rows())
    return document


def shown_all(document: dict[str, Any]) -> bool:
    """Whether a document from `load_run` holds every job of its run."""
    return len(document.get("jobs") or []) >= int(document.get("jobs_total", 0))
