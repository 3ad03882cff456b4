"""The results store's reads that answer from columns and incremental state rather than documents:
values at JSON paths, the job duration histogram, what `farm gc` weighs. `ResultsStore` calls
these on its connection; they write nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ondevice_farm.job_parts import join_job, parts_at, value_at
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


def load_parts(
    db: Database, job_ids: Sequence[str], names: Sequence[str] | None = None
) -> dict[str, dict[str, Any]]:
    """job_id -> its bulky parts ({where: value}), all of them or those of the BULKY_JOB_KEYS
    entries `names`; a job without any is absent."""
    found: dict[str, dict[str, Any]] = {}
    if names is not None and not names:
        return found
    only = f" AND part IN ({','.join('?' * len(names))})" if names is not None else ""
    for start in range(0, len(job_ids), IN_CHUNK):
        chunk = list(job_ids[start : start + IN_CHUNK])
        rows = db.execute(
            f"SELECT job_id, document FROM job_parts WHERE job_id IN ({','.join('?' * len(chunk))}){only}",
            (*chunk, *(names or ())),
        ).fetchall()
        for job_id, text in rows:
            found.setdefault(str(job_id), {}).update(json.loads(text))
    return found


def whole_jobs(db: Database, rows: Sequence[tuple[Any, str]]) -> list[dict[str, Any]]:
    """(job_id, summary JSON) rows -> the whole documents, in the rows' order."""
    parts = load_parts(db, [str(r[0]) for r in rows])
    return [join_job(json.loads(text), parts.get(str(job_id))) for job_id, text in rows]


@dataclass(frozen=True)
class PathPlan:
    """How to answer values at `paths`: columns where a path has one, else the parsed summary
    (once per row), joined with the bulky parts that a path reaches into, and only those."""

    paths: tuple[str, ...]

    @property
    def columns(self) -> list[str]:
        return [COLUMN_FOR_PATH[p].name for p in self.paths if p in COLUMN_FOR_PATH]

    @property
    def document(self) -> bool:
        return any(p not in COLUMN_FOR_PATH for p in self.paths)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for p in self.paths if p not in COLUMN_FOR_PATH for n in parts_at(p)))

    def select(self) -> str:
        """The select list after the caller's own columns: columns, then the summary."""
        return ", ".join(
            [*(f"jobs.{name}" for name in self.columns), *(["jobs.document"] if self.document else [])]
        )

    def values(self, row: Sequence[Any], parts: dict[str, Any] | None = None) -> list[Any]:
        """The values at `paths` from a row's part past the caller's own columns."""
        stored = iter(row)
        by_column = {name: next(stored) for name in self.columns}
        document: Any = None
        if self.document:
            document = json.loads(next(stored))
            if parts:
                document = join_job(document, parts)
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
        marks = ",".join("?" * len(chunk))
        rows = db.execute(
            f"SELECT jobs.job_id, {plan.select()} FROM jobs WHERE jobs.job_id IN ({marks})", chunk
        ).fetchall()
        parts = load_parts(db, [str(r[0]) for r in rows], plan.parts) if plan.parts else {}
        for row in rows:
            found[str(row[0])] = plan.values(row[1:], parts.get(str(row[0])))
    return found


def job_summaries(db: Database, paths: tuple[str, ...]) -> list[JobSummary]:
    plan = PathPlan(paths)
    extra = f", {plan.select()}" if paths else ""
    rows = db.execute(
        "SELECT jobs.run_id, jobs.job_id, jobs.model_name, jobs.model_sha256, jobs.device, jobs.target,"
        f" jobs.status, jobs.finished_at, jobs.document_bytes{extra} FROM jobs"
    ).fetchall()
    # a path into the bulky parts (gc asks for none) reads them all: a full read, as asked
    parts = load_parts(db, [str(r[1]) for r in rows], plan.parts) if plan.parts else {}
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
            plan.values(r[9:], parts.get(str(r[1]))) if paths else [],
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
