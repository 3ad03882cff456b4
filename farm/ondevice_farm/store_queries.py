"""The results store's reads that answer from columns and incremental state rather than documents:
values at JSON paths, the job duration histogram, what `farm gc` weighs. `ResultsStore` calls
these on its connection; they write nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ondevice_farm.job_parts import join_job, needs_parts, value_at
from ondevice_farm.store_schema import COLUMN_FOR_PATH, MICROS_PER_S, STORED_DURATION_BOUNDS_S
from ondevice_farm.store_sql import Database

#: ids per `IN (...)` list
IN_CHUNK = 500

DurationRow = tuple[str, str, int, int, float, list[int]]


@dataclass(frozen=True)
class JobSummary:
    """One stored job as `farm gc` sees it (`ResultsStore.job_summaries`)."""

    run_id: str
    job_id: str
    model_name: str
    model_sha256: str
    device: str
    target: str
    status: str
    finished_at: float
    document_bytes: int
    #: the values at the paths asked for, in their order (None where absent)
    values: list[Any]


@dataclass(frozen=True)
class PathPlan:
    """How to answer values at `paths`: columns where a path has one, else the parsed document
    (once per row), joined with its parts only where a path reaches into them."""

    paths: tuple[str, ...]

    @property
    def columns(self) -> list[str]:
        return [COLUMN_FOR_PATH[p].name for p in self.paths if p in COLUMN_FOR_PATH]

    @property
    def document(self) -> bool:
        return any(p not in COLUMN_FOR_PATH for p in self.paths)

    @property
    def parts(self) -> bool:
        return any(p not in COLUMN_FOR_PATH and needs_parts(p) for p in self.paths)

    def select(self, table: str = "jobs") -> str:
        """The select list after the caller's own columns: columns, then the documents."""
        items = [f"{table}.{name}" for name in self.columns]
        if self.document:
            items.append(f"{table}.document")
        if self.parts:
            items.append("job_parts.document")
        return ", ".join(items)

    def join(self, table: str = "jobs") -> str:
        return f" LEFT JOIN job_parts ON job_parts.job_id = {table}.job_id" if self.parts else ""

    def values(self, row: Sequence[Any]) -> list[Any]:
        """The values at `paths` from a row's part past the caller's own columns."""
        stored = iter(row)
        by_column = {name: next(stored) for name in self.columns}
        document: Any = None
        if self.document:
            document = json.loads(next(stored))
            if self.parts:
                parts = next(stored)
                document = join_job(document, json.loads(parts) if parts else None)
        return [
            COLUMN_FOR_PATH[p].read(by_column[COLUMN_FOR_PATH[p].name])
            if p in COLUMN_FOR_PATH
            else value_at(document, p)
            for p in self.paths
        ]


def job_fields(db: Database, job_ids: list[str], paths: tuple[str, ...]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    if not paths:
        return found
    plan = PathPlan(paths)
    for start in range(0, len(job_ids), IN_CHUNK):
        chunk = job_ids[start : start + IN_CHUNK]
        rows = db.execute(
            f"SELECT jobs.job_id, {plan.select()} FROM jobs{plan.join()}"
            f" WHERE jobs.job_id IN ({','.join('?' * len(chunk))})",
            chunk,
        ).fetchall()
        for row in rows:
            found[str(row[0])] = plan.values(row[1:])
    return found


def job_summaries(db: Database, paths: tuple[str, ...]) -> list[JobSummary]:
    plan = PathPlan(paths)
    extra = f", {plan.select()}" if paths else ""
    rows = db.execute(
        "SELECT jobs.run_id, jobs.job_id, jobs.model_name, jobs.model_sha256, jobs.device, jobs.target,"
        f" jobs.status, jobs.finished_at, jobs.document_bytes{extra} FROM jobs{plan.join()}"
    ).fetchall()
    return [
        JobSummary(
            str(r[0]),
            str(r[1]),
            str(r[2]),
            str(r[3]),
            str(r[4]),
            str(r[5]),
            str(r[6]),
            float(r[7]),
            int(r[8]),
            plan.values(r[9:]) if paths else [],
        )
        for r in rows
    ]


def duration_buckets(db: Database, bounds_s: tuple[float, ...]) -> list[DurationRow]:
    """From the aggregates add_job and delete_runs keep, where every bound is a stored one;
    otherwise (a collector asked for other buckets) a scan of the jobs_by_device_status index."""
    if not all(b in STORED_DURATION_BOUNDS_S for b in bounds_s):
        return _scanned_buckets(db, bounds_s)
    counts: dict[tuple[str, str], dict[int, int]] = {}
    for device, status, bucket, jobs in db.execute(
        "SELECT device, status, bucket, jobs FROM job_duration_counts"
    ).fetchall():
        counts.setdefault((str(device), str(status)), {})[int(bucket)] = int(jobs)
    indexes = [STORED_DURATION_BOUNDS_S.index(b) for b in bounds_s]
    rows = db.execute(
        "SELECT device, status, jobs, timed, micros FROM job_durations ORDER BY device, status"
    ).fetchall()
    result: list[DurationRow] = []
    for device, status, jobs, timed, micros in rows:
        per_bucket = counts.get((str(device), str(status)), {})
        cumulative = [sum(n for b, n in per_bucket.items() if b <= index) for index in indexes]
        result.append(
            (str(device), str(status), int(jobs), int(timed), int(micros) / MICROS_PER_S, cumulative)
        )
    return result


def _scanned_buckets(db: Database, bounds_s: tuple[float, ...]) -> list[DurationRow]:
    buckets = ", ".join("SUM(CASE WHEN finished_at - started_at <= ? THEN 1 ELSE 0 END)" for _ in bounds_s)
    rows = db.execute(
        "SELECT device, status, COUNT(*), COUNT(started_at), COALESCE(SUM(finished_at - started_at), 0)"
        f"{', ' + buckets if bounds_s else ''} FROM jobs GROUP BY device, status ORDER BY device, status",
        bounds_s,
    ).fetchall()
    return [
        (str(r[0]), str(r[1]), int(r[2]), int(r[3]), float(r[4]), [int(n or 0) for n in r[5:]]) for r in rows
    ]
