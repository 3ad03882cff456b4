"""The results store: SQLite in WAL mode (a path: the embedded default) or PostgreSQL (a
`postgresql://` URL: a fleet's controller), with one schema, versioned, migrated in order
(store_migrations.py).

A run row is written when a run starts; each job is written in one transaction when it is
complete (measurements, analysis and all) or failed (its error and nothing else). Readers
(the CLI, the metrics collector) never see half a job. A job is stored as its summary (the
`jobs` row: columns and the document without its bulky parts) and its bulky parts (`job_parts`
rows, one per BULKY_JOB_KEYS entry it has: job_parts.py); the same transaction keeps the
scrape's incremental state (store_state.py).
"""

from __future__ import annotations

import contextlib
import functools
import json
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ondevice_farm.errors import StoreError, UsageError
from ondevice_farm.job_parts import join_job
from ondevice_farm.store_migrations import MIGRATIONS, insert_parts, run_script
from ondevice_farm.store_queries import (
    DurationRow,
    JobSummary,
    duration_buckets,
    job_fields,
    job_summaries,
    load_parts,
    whole_jobs,
)
from ondevice_farm.store_retry import StoreHealth, StoreRetry
from ondevice_farm.store_schema import JOB_COLUMNS, StoredJob, job_row
from ondevice_farm.store_sql import (
    Database,
    PostgresDatabase,
    SqliteDatabase,
    StoreLocation,
    is_postgres_url,
    redacted,
    store_exists,
)
from ondevice_farm.store_state import WATERMARK_ROW, add_durations, lock_writer, offer_latest, repair_latest

__all__ = [
    "MIGRATIONS",
    "JobSummary",
    "ResultsStore",
    "RunRow",
    "StoreLocation",
    "new_run_id",
    "store_exists",
]

DEFAULT_BUSY_TIMEOUT_S = 30.0
DEFAULT_STORE_RETRY = StoreRetry()
T = TypeVar("T")
#: jobs removed per write transaction by delete_runs: SQLite's write lock is held per batch
DEFAULT_DELETE_BATCH_JOBS = 500
#: job summaries read per query by iter_run_job_summaries
DEFAULT_PAGE_JOBS = 1000
#: what the incremental state needs of a job row (store_state.StoredJob)
STORED_JOB_COLUMNS = "job_id, model_name, device, target, status, started_at, finished_at"


def _stored_job(row: tuple[Any, ...]) -> StoredJob:
    job_id, model, device, target, status, started_at, finished_at = row
    started = None if started_at is None else float(started_at)
    return StoredJob(str(job_id), (str(model), str(device), str(target)), str(device), str(status), started,
                     float(finished_at))  # fmt: skip


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


#: random bytes of a job id within its run: 64 bits leave a 300,000-job night about one chance in
#: 400 million of two jobs sharing an id (birthday bound n^2 / 2^65); the 3 bytes it had gave a
#: 10,000-job nightly ~3 such pairs, and each pair lost a job without a word (benchmarks/lab_scale.py)
JOB_ID_BYTES = 8


def new_job_id(run_id: str) -> str:
    return f"{run_id}-{secrets.token_hex(JOB_ID_BYTES)}"


@dataclass(frozen=True)
class RunRow:
    run_id: str
    created_at: float
    finished_at: float | None
    kind: str
    suite: str | None
    status: str
    document: dict[str, Any]


def job_row_document(row: Any) -> dict[str, Any]:
    """A `run_job_rows` row under the job document's own keys."""
    job_id, finished_at, model_name, target, requested, device, status, error, p50 = row
    document: dict[str, Any] = {
        "job_id": job_id,
        "finished_at": finished_at,
        "model": {"name": model_name},
        "target": target,
        "requested": requested,
        "device": device,
        "status": status,
        "error": error,
    }
    if p50 is not None:
        document["latency_ms"] = {"p50": float(p50)}
    return document


class ResultsStore:
    def __init__(
        self,
        path: StoreLocation,
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        retry: StoreRetry = DEFAULT_STORE_RETRY,
    ) -> None:
        #: for messages: the file, or the URL without its password
        self.path = redacted(path) if is_postgres_url(path) else Path(path)
        self.retry = retry
        self.health = StoreHealth(str(self.path))
        self._errors: tuple[type[BaseException], ...] = (Exception,)
        try:
            if is_postgres_url(path):
                self._db: Database = PostgresDatabase(str(path), busy_timeout_s)
            else:
                self._db = SqliteDatabase(Path(path), busy_timeout_s)
            self._errors = self._db.errors
            self._migrate()
        except ImportError:
            raise StoreError(
                f"{self.path}: a PostgreSQL store needs psycopg", hint="pip install 'ondevice-farm[postgres]'"
            ) from None
        except self._errors as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"{self.path}: cannot open the results store ({reason})") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[Database]:
        """One write transaction, tried once (the schema's migration)."""
        try:
            self._db.begin_write()
            try:
                yield self._db
            except BaseException:
                self._db.rollback()
                raise
            self._db.commit()
        except self._errors as exc:
            raise StoreError(f"{self.path}: {exc}") from None

    def _write(self, write: Callable[[Database], T]) -> T:
        """`write` in one transaction, tried again from its start while the database is busy or
        unreachable, up to `StoreRetry.outage_s` (store_retry.py); `write` must be idempotent."""
        backoffs = self.retry.backoffs_s()
        deadline: float | None = None
        with self.health.writing():
            while True:
                try:
                    self._db.begin_write()
                    try:
                        result = write(self._db)
                    except BaseException:
                        with contextlib.suppress(*self._errors):
                            self._db.rollback()
                        raise
                    self._db.commit()
                except self._errors as exc:
                    if not self._db.is_transient(exc):
                        raise StoreError(f"{self.path}: {exc}") from None
                    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    now = time.monotonic()
                    deadline = now + self.retry.outage_s if deadline is None else deadline
                    if now >= deadline:
                        raise StoreError(
                            f"{self.path}: took no write for {self.retry.outage_s:.0f}s ({reason})",
                            hint="is the database up and reachable? writes wait this long for it",
                        ) from None
                    self.health.failed(reason, self.retry.outage_s)
                    time.sleep(min(next(backoffs), max(0.0, deadline - now)))
                    with contextlib.suppress(*self._errors):
                        self._db.reconnect()
                    continue
                self.health.recovered()
                return result

    def _check_version(self, version: int) -> None:
        if version > len(MIGRATIONS):
            raise StoreError(
                f"{self.path}: written by a newer farm (schema {version}, this one knows {len(MIGRATIONS)})",
                hint="upgrade farm, or point FARM_HOME / --store elsewhere",
            )

    def _migrate(self) -> None:
        self._check_version(self._db.schema_version())
        if self._db.schema_version() == len(MIGRATIONS):
            return
        # The version is read again inside the write transaction: of two first opens at once, one
        # migrates and the other then finds nothing left to do ("table runs already exists").
        with self._transaction() as db:
            if isinstance(db, PostgresDatabase):
                db.lock_for_migration()
            version = db.schema_version()
            self._check_version(version)
            for script in MIGRATIONS[version:]:
                if callable(script):
                    script(db)
                else:
                    run_script(db, script)
            db.set_schema_version(len(MIGRATIONS))

    @property
    def schema_version(self) -> int:
        return self._db.schema_version()

    # -- writing -------------------------------------------------------------------------

    def start_run(self, run_id: str, kind: str, document: dict[str, Any], suite: str | None = None) -> None:
        created_at, encoded = time.time(), json.dumps(document)

        def write(db: Database) -> None:
            if db.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone() is not None:
                return  # a retry of a start whose commit went through
            db.execute(
                "INSERT INTO runs(run_id, created_at, kind, suite, status, document) VALUES (?,?,?,?,?,?)",
                (run_id, created_at, kind, suite, "running", encoded),
            )

        self._write(write)

    def add_job(self, run_id: str, job: dict[str, Any]) -> None:
        """One complete (or failed) job, in one transaction: its summary row, its bulky parts, and
        the incremental state. A document without `finished_at` is stored with the time now."""
        if job.get("finished_at") is None:
            job = {**job, "finished_at": time.time()}
        row = job_row(run_id, job)

        def write(db: Database) -> None:
            # before the watermark's lock: a job id is written once, however often this is tried
            if db.execute("SELECT 1 FROM jobs WHERE job_id=?", (row.job.job_id,)).fetchone() is not None:
                return
            lock_writer(db, jobs_delta=1)
            db.execute(
                f"INSERT INTO jobs({','.join(JOB_COLUMNS)}) VALUES ({','.join('?' * len(JOB_COLUMNS))})",
                row.values,
            )
            insert_parts(db, row)
            add_durations(db, [row.job], 1)
            offer_latest(db, row.job)

        self._write(write)

    def finish_run(self, run_id: str, status: str) -> None:
        finished_at = time.time()

        def write(db: Database) -> None:
            lock_writer(db)
            db.execute(
                "UPDATE runs SET status=?, finished_at=? WHERE run_id=?", (status, finished_at, run_id)
            )

        self._write(write)

    # -- reading -------------------------------------------------------------------------

    def _run_row(self, row: tuple[Any, ...]) -> RunRow:
        return RunRow(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6]))

    def runs(self, limit: int = 50, kind: str | None = None, suite: str | None = None) -> list[RunRow]:
        query = "SELECT run_id, created_at, finished_at, kind, suite, status, document FROM runs"
        clauses: list[str] = []
        args: list[Any] = []
        if kind:
            clauses.append("kind=?")
            args.append(kind)
        if suite:
            clauses.append("suite=?")
            args.append(suite)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        query += " ORDER BY created_at DESC, run_id DESC LIMIT ?"
        args.append(int(limit))
        return [self._run_row(r) for r in self._db.execute(query, args).fetchall()]

    def resolve_run_id(self, prefix: str) -> str:
        """A run id, or a unique prefix of one (as git takes commit prefixes)."""
        rows = self._db.execute(
            "SELECT run_id FROM runs WHERE run_id LIKE ? ESCAPE '!' ORDER BY run_id",
            (prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%",),
        ).fetchall()
        if not rows:
            raise UsageError(f"no run {prefix!r} in {self.path}", hint="`farm runs` lists the stored runs")
        if len(rows) > 1 and rows[0][0] != prefix:
            raise UsageError(f"run id prefix {prefix!r} is ambiguous: {', '.join(r[0] for r in rows[:5])}")
        return str(rows[0][0])

    def run(self, run_id: str) -> RunRow:
        row = self._db.execute(
            "SELECT run_id, created_at, finished_at, kind, suite, status, document FROM runs WHERE run_id=?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise UsageError(f"no run {run_id!r} in {self.path}")
        return self._run_row(row)

    def jobs(self, run_id: str) -> list[dict[str, Any]]:
        """Every job of the run, whole, by (finished_at, job_id): `iter_run_job_summaries` reads a
        large run without its bulky parts, a page at a time."""
        rows = self._db.execute(
            "SELECT job_id, document FROM jobs WHERE run_id=? ORDER BY finished_at, job_id", (run_id,)
        ).fetchall()
        return whole_jobs(self._db, rows)

    def job(self, job_id: str, *, parts: tuple[str, ...] | None = None) -> dict[str, Any]:
        """One job's document, whole; with `parts`, its summary and only those BULKY_JOB_KEYS
        entries (`parts=("ops",)`: the op table without the trace)."""
        row = self._db.execute("SELECT document FROM jobs WHERE job_id=?", (job_id,)).fetchone()
        if row is None:
            raise UsageError(f"no job {job_id!r} in {self.path}")
        return join_job(json.loads(row[0]), load_parts(self._db, [job_id], parts).get(job_id))

    def run_job_summaries(
        self, run_id: str, *, after: tuple[float, str] | None = None, limit: int = DEFAULT_PAGE_JOBS
    ) -> list[dict[str, Any]]:
        """One page of the run's job summaries (documents without their bulky parts,
        job_parts.BULKY_JOB_KEYS) by (finished_at, job_id), from just past `after`: the last
        page's last (finished_at, job_id). One seek of the jobs_by_run index per page."""
        return [json.loads(r[0]) for r in self._run_page("document", run_id, after, limit)]

    def run_job_rows(
        self, run_id: str, *, after: tuple[float, str] | None = None, limit: int = DEFAULT_PAGE_JOBS
    ) -> list[dict[str, Any]]:
        """One page of the run's jobs as their columns only, in run_job_summaries' order, under a
        job document's keys (`job_id`, `finished_at`, `model.name`, `target`, `requested`,
        `device`, `status`, `error`, `latency_ms.p50`): what a run's per-(model, target) table
        reads, with no document parsed (a summary is ~40 kB once parsed at 200 ops)."""
        columns = "job_id, finished_at, model_name, target, requested, device, status, error, latency_p50_ms"
        return [job_row_document(row) for row in self._run_page(columns, run_id, after, limit)]

    def _run_page(
        self, columns: str, run_id: str, after: tuple[float, str] | None, limit: int
    ) -> list[tuple[Any, ...]]:
        """`columns` of one page of the run's jobs by (finished_at, job_id), from just past `after`."""
        query = f"SELECT {columns} FROM jobs WHERE run_id=?"
        args: list[Any] = [run_id]
        if after is not None:
            query += " AND (finished_at, job_id) > (?, ?)"
            args += [float(after[0]), str(after[1])]
        args.append(int(limit))
        rows: list[tuple[Any, ...]] = self._db.execute(
            query + " ORDER BY finished_at, job_id LIMIT ?", args
        ).fetchall()
        return rows

    def iter_run_job_summaries(self, run_id: str, page: int = DEFAULT_PAGE_JOBS) -> Iterator[dict[str, Any]]:
        """Every job summary of the run, in run_job_summaries' order, read `page` at a time: the
        memory it holds is one page, whatever the run's size."""
        after: tuple[float, str] | None = None
        while True:
            rows = self.run_job_summaries(run_id, after=after, limit=page)
            yield from rows
            if len(rows) < page:
                return
            after = (float(rows[-1]["finished_at"]), str(rows[-1]["job_id"]))

    def job_counts(self, run_id: str) -> dict[str, int]:
        rows = self._db.execute(
            "SELECT status, COUNT(*) FROM jobs WHERE run_id=? GROUP BY status", (run_id,)
        ).fetchall()
        return {str(status): int(count) for status, count in rows}

    def latest_jobs(self) -> list[dict[str, Any]]:
        """The newest successful job per (model, device, target), whole: what dashboards show now."""
        rows = self._db.execute(
            "SELECT jobs.job_id, jobs.document FROM series_latest"
            " JOIN jobs ON jobs.job_id = series_latest.job_id"
            " ORDER BY series_latest.model_name, series_latest.device, series_latest.target"
        ).fetchall()
        return whole_jobs(self._db, rows)

    # -- metrics: what farm/ondevice_farm/metrics/collector.py reads at every scrape --------------------

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """Reads inside see the store at one instant: a scrape never mixes two states of it."""
        try:
            self._db.begin_read()
        except self._errors as exc:
            raise StoreError(f"{self.path}: {exc}") from None
        try:
            yield
        except self._errors as exc:
            raise StoreError(f"{self.path}: {exc}") from None
        finally:
            self._db.rollback()

    def latest_job_ids(self) -> list[str]:
        """job_id of the newest successful job per (model, device, target): the series_latest
        table, which every write keeps current."""
        rows = self._db.execute(
            "SELECT job_id FROM series_latest ORDER BY model_name, device, target"
        ).fetchall()
        return [str(r[0]) for r in rows]

    def job_fields(self, job_ids: list[str], paths: tuple[str, ...]) -> dict[str, list[Any]]:
        """job_id -> the values at `paths` (`$.latency_ms.p50`, ...) of its document: from the
        summary columns where a path has one (store_schema.py), else from the document, parsed
        once per job (with its bulky parts only where a path reaches into them)."""
        return job_fields(self._db, job_ids, paths)

    def job_duration_buckets(self, bounds_s: tuple[float, ...]) -> list[DurationRow]:
        """Per (device, status): jobs, jobs with a start time, their summed duration, and how many
        took at most each bound (cumulative, as Prometheus buckets are). Bounds among
        STORED_DURATION_BOUNDS_S read the aggregates every write keeps; others scan an index."""
        return duration_buckets(self._db, bounds_s)

    def last_finished_runs(self, kind: str) -> dict[str, float]:
        """suite ('' for none) -> when its newest complete run of `kind` finished."""
        rows = self._db.execute(
            "SELECT COALESCE(suite, ''), MAX(finished_at) FROM runs"
            " WHERE kind=? AND status='complete' AND finished_at IS NOT NULL GROUP BY COALESCE(suite, '')",
            (kind,),
        ).fetchall()
        return {str(r[0]): float(r[1]) for r in rows}

    # -- runs a dead controller left behind (the fleet, issue 3) ----------------------------

    def running_runs(self) -> list[RunRow]:
        rows = self._db.execute(
            "SELECT run_id, created_at, finished_at, kind, suite, status, document FROM runs"
            " WHERE status='running' ORDER BY created_at"
        ).fetchall()
        return [self._run_row(r) for r in rows]

    def mark_interrupted(self, run_id: str) -> bool:
        """A run whose controller died: its complete jobs stay, the run says it did not finish."""
        finished_at = time.time()

        def write(db: Database) -> bool:
            lock_writer(db)
            cursor = db.execute(
                "UPDATE runs SET status='interrupted', finished_at=? WHERE run_id=? AND status='running'",
                (finished_at, run_id),
            )
            return bool(cursor.rowcount > 0)

        return self._write(write)

    # -- retention (`farm gc`, farm/ondevice_farm/gc/) ---------------------------------------------------

    def job_summaries(self, paths: tuple[str, ...]) -> list[JobSummary]:
        """Every job's row with the values at `paths` and its stored size: what `farm gc` weighs.
        Paths with a summary column (gc's all have one) read the jobs_retention index, no document."""
        return job_summaries(self._db, paths)

    def delete_runs(self, run_ids: list[str], *, batch_jobs: int = DEFAULT_DELETE_BATCH_JOBS) -> int:
        """Remove runs and their jobs, `batch_jobs` jobs per transaction (a run's row goes with its
        last batch); a run still running is never removed. An interrupted call leaves some runs
        with fewer jobs, never a job half removed; calling it again finishes them. How many runs went."""
        removed = 0
        for run_id in run_ids:
            while True:
                batch = functools.partial(self._delete_batch, run_id=run_id, batch_jobs=max(1, batch_jobs))
                done = self._write(batch)
                if done is not None:
                    removed += done
                    break
        return removed

    def _delete_batch(self, db: Database, run_id: str, batch_jobs: int) -> int | None:
        """One batch of the run's jobs; 1 or 0 once the run itself is removed (or is not to be)."""
        lock_writer(db)
        status = db.execute("SELECT status FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if status is None or status[0] == "running":
            return 0
        rows = db.execute(
            f"SELECT {STORED_JOB_COLUMNS} FROM jobs WHERE run_id=? ORDER BY job_id LIMIT ?",
            (run_id, batch_jobs),
        ).fetchall()
        stored = [_stored_job(tuple(r)) for r in rows]
        if stored:
            ids = [job.job_id for job in stored]
            marks = ",".join("?" * len(ids))
            db.execute(f"DELETE FROM job_parts WHERE job_id IN ({marks})", ids)
            db.execute(f"DELETE FROM jobs WHERE job_id IN ({marks})", ids)
            db.execute("UPDATE jobs_watermark SET jobs = jobs - ? WHERE id = ?", (len(ids), WATERMARK_ROW))
            add_durations(db, stored, -1)
            repair_latest(db, stored)
        if len(stored) == batch_jobs:
            return None
        cursor = db.execute("DELETE FROM runs WHERE run_id=? AND status <> 'running'", (run_id,))
        return int(cursor.rowcount)

    def jobs_version(self) -> tuple[int, int]:
        """(jobs stored, changes written): one primary-key read of the watermark that every write
        moves in its own transaction, so it changes whenever a job is added or removed."""
        row = self._db.execute(
            "SELECT jobs, changes FROM jobs_watermark WHERE id=?", (WATERMARK_ROW,)
        ).fetchone()
        return (int(row[0]), int(row[1]))
