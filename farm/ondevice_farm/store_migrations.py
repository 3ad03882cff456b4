"""The results store's schema, as the migrations that build it, in order; a store records how many
it has run (SQLite: `PRAGMA user_version`, PostgreSQL: the farm_schema table) and runs the rest
when opened. A migration once released is never edited: a change is a new one at the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ondevice_farm.store_schema import JOB_COLUMNS, JobRow, StoredJob, job_row
from ondevice_farm.store_sql import Database
from ondevice_farm.store_state import WATERMARK_ROW, add_durations

#: old job rows read per page when a migration rewrites them all
MIGRATION_PAGE_ROWS = 500


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


#: schema 4's jobs table: the summary columns before the document, so that a row's columns are
#: read without stepping through the document's overflow pages (SQLite stores columns in order)
SUMMARY_JOBS_TABLE = """
    CREATE TABLE jobs_v4 (
        job_id        TEXT PRIMARY KEY,
        run_id        TEXT NOT NULL REFERENCES runs(run_id),
        model_name    TEXT NOT NULL,
        model_sha256  TEXT NOT NULL,
        device        TEXT NOT NULL,
        unit          TEXT,
        target        TEXT NOT NULL,
        status        TEXT NOT NULL,
        error         TEXT,
        started_at    REAL,
        finished_at   REAL NOT NULL,
        requested                TEXT,
        artifact_sha256          TEXT,
        paired_baseline_sha256   TEXT,
        latency_p50_ms           REAL,
        latency_p90_ms           REAL,
        latency_p99_ms           REAL,
        first_inference_ms       REAL,
        load_ms                  REAL,
        warm_load_ms             REAL,
        peak_memory_mb           REAL,
        reference_status         TEXT,
        reference_passed         INTEGER,
        provenance_latency       TEXT,
        provenance_placement     TEXT,
        energy_mj_per_inference  REAL,
        energy_uncertainty_mj    REAL,
        energy_source            TEXT,
        sustained_slowdown       REAL,
        sustained_throttle_s     REAL,
        sustained_energy_mj_per_inference  REAL,
        generation_ttft_ms       REAL,
        generation_decode_tokens_per_s     REAL,
        document_bytes           BIGINT NOT NULL,  -- summary and parts, as JSON text
        document                 TEXT NOT NULL     -- the job JSON without its bulky parts
    );
    CREATE TABLE job_parts (
        job_id    TEXT NOT NULL,                   -- written and removed with its jobs row
        part      TEXT NOT NULL,                   -- a job_parts.BULKY_JOB_KEYS entry
        document  TEXT NOT NULL,                   -- its parts, {where: value} (split_job)
        PRIMARY KEY (job_id, part)
    );
    CREATE TABLE jobs_watermark (id INTEGER PRIMARY KEY, jobs BIGINT NOT NULL, changes BIGINT NOT NULL);
    CREATE TABLE job_durations (
        device TEXT NOT NULL, status TEXT NOT NULL,
        jobs BIGINT NOT NULL, timed BIGINT NOT NULL, micros BIGINT NOT NULL,
        PRIMARY KEY (device, status)
    );
    CREATE TABLE job_duration_counts (
        device TEXT NOT NULL, status TEXT NOT NULL, bucket INTEGER NOT NULL, jobs BIGINT NOT NULL,
        PRIMARY KEY (device, status, bucket)
    );
    CREATE TABLE series_latest (
        model_name TEXT NOT NULL, device TEXT NOT NULL, target TEXT NOT NULL,
        job_id TEXT NOT NULL, finished_at REAL NOT NULL,
        PRIMARY KEY (model_name, device, target)
    )
"""
SUMMARY_JOBS_INDEXES = """
    DROP TABLE jobs;
    ALTER TABLE jobs_v4 RENAME TO jobs;
    CREATE INDEX jobs_by_run ON jobs(run_id, finished_at, job_id);
    CREATE INDEX jobs_by_series ON jobs(model_name, device, target, finished_at, job_id, status,
        latency_p50_ms);
    CREATE INDEX jobs_latest_ok ON jobs(status, model_name, device, target, finished_at, job_id);
    CREATE INDEX jobs_by_device_status ON jobs(device, status, started_at, finished_at);
    CREATE INDEX jobs_retention ON jobs(run_id, job_id, model_name, model_sha256, device, target, status,
        finished_at, document_bytes, requested, artifact_sha256, paired_baseline_sha256)
"""


def insert_parts(db: Database, row: JobRow) -> None:
    for name, text in row.parts.items():
        db.execute(
            "INSERT INTO job_parts(job_id, part, document) VALUES (?, ?, ?)", (row.job.job_id, name, text)
        )


def run_script(db: Database, script: str) -> None:
    for statement in db.ddl(script).split(";"):
        if statement.strip():
            db.execute(statement)


def summary_columns_migration(db: Database) -> None:
    """Schema 4: every job's summary columns filled, its bulky parts moved to job_parts, and the
    incremental state (watermark, duration aggregates, newest job per series) built, in one pass
    over the old rows, a page at a time."""
    run_script(db, SUMMARY_JOBS_TABLE)
    marks = ",".join("?" * len(JOB_COLUMNS))
    latest: dict[tuple[str, str, str], tuple[float, str]] = {}
    count = 0
    after = ""
    while True:
        page = db.execute(
            "SELECT job_id, run_id, finished_at, document FROM jobs WHERE job_id > ? ORDER BY job_id LIMIT ?",
            (after, MIGRATION_PAGE_ROWS),
        ).fetchall()
        if not page:
            break
        stored: list[StoredJob] = []
        for _, run_id, finished_at, text in page:
            document: dict[str, Any] = json.loads(text)
            # the old add_job stored "now" in the column for a document without a finish time
            if document.get("finished_at") is None:
                document["finished_at"] = finished_at
            row = job_row(str(run_id), document)
            db.execute(f"INSERT INTO jobs_v4({','.join(JOB_COLUMNS)}) VALUES ({marks})", row.values)
            insert_parts(db, row)
            stored.append(row.job)
            if row.job.status == "ok":
                key = (row.job.finished_at, row.job.job_id)
                latest[row.job.series] = max(latest.get(row.job.series, key), key)
        add_durations(db, stored, 1)
        count += len(page)
        after = str(page[-1][0])
    for series, (finished_at, job_id) in sorted(latest.items()):
        db.execute(
            "INSERT INTO series_latest(model_name, device, target, job_id, finished_at) VALUES (?,?,?,?,?)",
            (*series, job_id, finished_at),
        )
    db.execute("INSERT INTO jobs_watermark(id, jobs, changes) VALUES (?, ?, 0)", (WATERMARK_ROW, count))
    run_script(db, SUMMARY_JOBS_INDEXES)


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
    # Summary columns, bulky parts apart, and the state a scrape reads instead of scanning jobs.
    summary_columns_migration,
)
