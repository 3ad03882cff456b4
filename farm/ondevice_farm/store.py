"""The results store: SQLite in WAL mode (a path: the embedded default) or PostgreSQL (a
`postgresql://` URL: a fleet's controller), with one schema, versioned, migrated in order.

A run row is written when a run starts; each job is written in one transaction when it is
complete (measurements, analysis and all) or failed (its error and nothing else). Readers
(the CLI, the metrics collector) never see half a job.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ondevice_farm.errors import StoreError, UsageError
from ondevice_farm.store_sql import (
    Database,
    PostgresDatabase,
    SqliteDatabase,
    StoreLocation,
    decode_values,
    is_postgres_url,
    redacted,
    store_exists,
)

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


def reference_states_migration(db: Database) -> None:
    """A job stored before the three states has only `reference.passed`. One whose runner returned
    no outputs was stored as failed with every output "missing": it was never compared, and must
    not show (or alert) as a failure."""
    rows = db.execute("SELECT job_id, document FROM jobs WHERE status = 'ok'").fetchall()
    for job_id, text in rows:
        document = json.loads(text)
        reference = document.get("reference")
        if not isinstance(reference, dict) or "status" in reference:
            continue
        if reference.get("outputs") == {} and reference.get("missing_outputs"):
            reference.update(
                status="not_compared", passed=None, reason="the runner returned no outputs to compare"
            )
        else:
            reference["status"] = "passed" if reference.get("passed") is True else "failed"
        db.execute("UPDATE jobs SET document = ? WHERE job_id = ?", (json.dumps(document), job_id))


Migration = str | Callable[[Database], None]

MIGRATIONS: tuple[Migration, ...] = (
    """
    CREATE TABLE runs (
        run_id       TEXT PRIMARY KEY,
        created_at   REAL NOT NULL,
        finished_at  REAL,
        kind         TEXT NOT NULL,          -- submit | nightly
        suite        TEXT,
        status       TEXT NOT NULL,          -- running | complete | failed | interrupted
        document     TEXT NOT NULL           -- run-level JSON: models, settings
    );
    CREATE TABLE jobs (
        job_id        TEXT PRIMARY KEY,
        run_id        TEXT NOT NULL REFERENCES runs(run_id),
        model_name    TEXT NOT NULL,
        model_sha256  TEXT NOT NULL,
        device        TEXT NOT NULL,
        unit          TEXT,
        target        TEXT NOT NULL,
        status        TEXT NOT NULL,         -- ok | failed
        error         TEXT,
        started_at    REAL,
        finished_at   REAL NOT NULL,
        document      TEXT NOT NULL          -- the job JSON (docs/results.md)
    );
    CREATE INDEX jobs_by_run ON jobs(run_id);
    CREATE INDEX jobs_by_series ON jobs(model_name, device, target, finished_at);
    """,
    # Covering indexes for what the metrics exporter reads at every scrape: without them each
    # scrape walks every row, whose pages hold the start of each (large) job document.
    """
    CREATE INDEX jobs_latest_ok ON jobs(status, model_name, device, target, finished_at, job_id);
    CREATE INDEX jobs_by_device_status ON jobs(device, status, started_at, finished_at);
    """,
    # The reference check's three states (docs/results.md): written in Python (below), the same
    # on SQLite and PostgreSQL, whose JSON functions differ.
    reference_states_migration,
)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass(frozen=True)
class RunRow:
    run_id: str
    created_at: float
    finished_at: float | None
    kind: str
    suite: str | None
    status: str
    document: dict[str, Any]


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


class ResultsStore:
    def __init__(self, path: StoreLocation, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        #: for messages: the file, or the URL without its password
        self.path = redacted(path) if is_postgres_url(path) else Path(path)
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
                    continue
                for statement in db.ddl(script).split(";"):
                    if statement.strip():
                        db.execute(statement)
            db.set_schema_version(len(MIGRATIONS))

    @property
    def schema_version(self) -> int:
        return self._db.schema_version()

    # -- writing -------------------------------------------------------------------------

    def start_run(self, run_id: str, kind: str, document: dict[str, Any], suite: str | None = None) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO runs(run_id, created_at, kind, suite, status, document) VALUES (?,?,?,?,?,?)",
                (run_id, time.time(), kind, suite, "running", json.dumps(document)),
            )

    def add_job(self, run_id: str, job: dict[str, Any]) -> None:
        """One complete (or failed) job, in one transaction."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO jobs(job_id, run_id, model_name, model_sha256, device, unit, target, status,"
                " error, started_at, finished_at, document) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    job["job_id"],
                    run_id,
                    job["model"]["name"],
                    job["model"]["sha256"],
                    job["device"],
                    job.get("unit"),
                    job["target"],
                    job["status"],
                    job.get("error"),
                    job.get("started_at"),
                    job.get("finished_at") or time.time(),
                    json.dumps(job),
                ),
            )

    def finish_run(self, run_id: str, status: str) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET status=?, finished_at=? WHERE run_id=?", (status, time.time(), run_id)
            )

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
        rows = self._db.execute(
            "SELECT document FROM jobs WHERE run_id=? ORDER BY finished_at, job_id", (run_id,)
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def job_counts(self, run_id: str) -> dict[str, int]:
        rows = self._db.execute(
            "SELECT status, COUNT(*) FROM jobs WHERE run_id=? GROUP BY status", (run_id,)
        ).fetchall()
        return {str(status): int(count) for status, count in rows}

    def latest_jobs(self) -> list[dict[str, Any]]:
        """The newest successful job per (model, device, target), whole: what dashboards show now."""
        ids = self.latest_job_ids()
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self._db.execute(f"SELECT document FROM jobs WHERE job_id IN ({marks})", ids).fetchall()
        return [json.loads(r[0]) for r in rows]

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
        """job_id of the newest successful job per (model, device, target)."""
        rows = self._db.execute(self._db.newest_ok_job_ids()).fetchall()
        return [str(r[0]) for r in rows]

    def job_fields(self, job_ids: list[str], paths: tuple[str, ...]) -> dict[str, list[Any]]:
        """job_id -> the values at `paths` (`$.latency_ms.p50`, ...) of its document, parsed in the
        database."""
        found: dict[str, list[Any]] = {}
        if not paths:
            return found
        expression, expression_args = self._db.json_values(paths)
        for start in range(0, len(job_ids), 500):
            chunk = job_ids[start : start + 500]
            rows = self._db.execute(
                f"SELECT job_id, {expression} FROM jobs WHERE job_id IN ({','.join('?' * len(chunk))})",
                (*expression_args, *chunk),
            ).fetchall()
            for job_id, values in rows:
                found[str(job_id)] = decode_values(values)[: len(paths)]
        return found

    def job_duration_buckets(
        self, bounds_s: tuple[float, ...]
    ) -> list[tuple[str, str, int, int, float, list[int]]]:
        """Per (device, status): jobs, jobs with a start time, their summed duration, and how many
        took at most each bound (cumulative, as Prometheus buckets are)."""
        buckets = ", ".join(
            "SUM(CASE WHEN finished_at - started_at <= ? THEN 1 ELSE 0 END)" for _ in bounds_s
        )
        rows = self._db.execute(
            f"SELECT device, status, COUNT(*), COUNT(started_at), COALESCE(SUM(finished_at - started_at), 0)"
            f"{', ' + buckets if bounds_s else ''} FROM jobs GROUP BY device, status",
            bounds_s,
        ).fetchall()
        return [
            (str(r[0]), str(r[1]), int(r[2]), int(r[3]), float(r[4]), [int(n or 0) for n in r[5:]])
            for r in rows
        ]

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
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE runs SET status='interrupted', finished_at=? WHERE run_id=? AND status='running'",
                (time.time(), run_id),
            )
        return bool(cursor.rowcount > 0)

    # -- retention (`farm gc`, farm/ondevice_farm/gc/) ---------------------------------------------------

    def job_summaries(self, paths: tuple[str, ...]) -> list[JobSummary]:
        """Every job's row with the values at `paths` of its document and the document's length,
        parsed in the database: what `farm gc` weighs, without reading whole documents."""
        expression, args = self._db.json_values(paths) if paths else ("NULL", [])
        rows = self._db.execute(
            "SELECT run_id, job_id, model_name, model_sha256, device, target, status, finished_at,"
            f" LENGTH(document), {expression} FROM jobs",
            args,
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
                decode_values(r[9])[: len(paths)] if paths else [],
            )
            for r in rows
        ]

    def delete_runs(self, run_ids: list[str]) -> int:
        """Remove runs and their jobs in one transaction; a run still running is never removed.
        How many runs went."""
        removed = 0
        with self._transaction() as db:
            for start in range(0, len(run_ids), 500):
                chunk = run_ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                db.execute(
                    f"DELETE FROM jobs WHERE run_id IN ({marks}) AND run_id IN"
                    " (SELECT run_id FROM runs WHERE status <> 'running')",
                    chunk,
                )
                cursor = db.execute(
                    f"DELETE FROM runs WHERE run_id IN ({marks}) AND status <> 'running'", chunk
                )
                removed += int(cursor.rowcount)
        return removed

    def jobs_version(self) -> tuple[int, int]:
        """Changes whenever a job is added or removed: (number of jobs, largest rowid)."""
        row = self._db.execute(f"SELECT COUNT(*), {self._db.change_marker()} FROM jobs").fetchone()
        return (int(row[0]), int(row[1]))
