"""State the results store keeps up to date in every write transaction, so that a scrape reads a
few small rows instead of scanning every job (docs/results.md, "The results store"):

- `jobs_watermark`: one row, (jobs stored, changes): bumped first in every write, so on PostgreSQL
  its row lock also orders concurrent writers (the read-modify-writes below never race);
- `job_durations` / `job_duration_counts`: per (device, status) the jobs, how many started on a
  unit, their summed time there (whole microseconds), and per stored bucket how many took at most
  that bound and more than the one before (STORED_DURATION_BOUNDS_S);
- `series_latest`: (model, device, target) -> the newest successful job, by (finished_at, job_id).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ondevice_farm.store_schema import StoredJob, duration_bucket, duration_micros
from ondevice_farm.store_sql import Database

WATERMARK_ROW = 0


def lock_writer(db: Database, jobs_delta: int = 0) -> None:
    """First statement of every write: the change counter moves, whatever the write."""
    db.execute(
        "UPDATE jobs_watermark SET jobs = jobs + ?, changes = changes + 1 WHERE id = ?",
        (jobs_delta, WATERMARK_ROW),
    )


def add_durations(db: Database, jobs: Iterable[StoredJob], sign: int) -> None:
    """Count `jobs` in (sign 1) or out of (sign -1) the duration aggregates."""
    totals: Counter[tuple[str, str, str]] = Counter()
    buckets: Counter[tuple[str, str, int]] = Counter()
    for job in jobs:
        key = (job.device, job.status)
        totals[(*key, "jobs")] += sign
        bucket = duration_bucket(job.started_at, job.finished_at)
        if bucket is not None:
            totals[(*key, "timed")] += sign
            totals[(*key, "micros")] += sign * duration_micros(job.started_at, job.finished_at)
            buckets[(*key, bucket)] += sign
    for device, status in sorted({(d, s) for d, s, _ in totals}):
        db.execute(
            "INSERT INTO job_durations(device, status, jobs, timed, micros) VALUES (?,?,?,?,?)"
            " ON CONFLICT(device, status) DO UPDATE SET jobs = job_durations.jobs + excluded.jobs,"
            " timed = job_durations.timed + excluded.timed, micros = job_durations.micros + excluded.micros",
            (
                device,
                status,
                totals[(device, status, "jobs")],
                totals[(device, status, "timed")],
                totals[(device, status, "micros")],
            ),
        )
    for (device, status, bucket), count in sorted(buckets.items()):
        db.execute(
            "INSERT INTO job_duration_counts(device, status, bucket, jobs) VALUES (?,?,?,?)"
            " ON CONFLICT(device, status, bucket)"
            " DO UPDATE SET jobs = job_duration_counts.jobs + excluded.jobs",
            (device, status, bucket, count),
        )
    if sign < 0:
        db.execute("DELETE FROM job_durations WHERE jobs <= 0")
        db.execute("DELETE FROM job_duration_counts WHERE jobs <= 0")


def offer_latest(db: Database, job: StoredJob) -> None:
    """A new successful job becomes its series' latest if it is newer than the one there."""
    if job.status != "ok":
        return
    db.execute(
        "INSERT INTO series_latest(model_name, device, target, job_id, finished_at) VALUES (?,?,?,?,?)"
        " ON CONFLICT(model_name, device, target) DO UPDATE SET job_id = excluded.job_id,"
        " finished_at = excluded.finished_at WHERE excluded.finished_at > series_latest.finished_at"
        " OR (excluded.finished_at = series_latest.finished_at AND excluded.job_id > series_latest.job_id)",
        (*job.series, job.job_id, job.finished_at),
    )


def repair_latest(db: Database, removed: Iterable[StoredJob]) -> None:
    """After `removed` left the jobs table: each series whose latest job went falls back to its
    newest remaining successful job (one seek of the jobs_latest_ok index), or goes."""
    gone = {job.job_id for job in removed}
    for series in sorted({job.series for job in removed if job.status == "ok"}):
        row = db.execute(
            "SELECT job_id FROM series_latest WHERE model_name=? AND device=? AND target=?", series
        ).fetchone()
        if row is None or str(row[0]) not in gone:
            continue
        newest = db.execute(
            "SELECT job_id, finished_at FROM jobs"
            " WHERE status='ok' AND model_name=? AND device=? AND target=?"
            " ORDER BY finished_at DESC, job_id DESC LIMIT 1",
            series,
        ).fetchone()
        if newest is None:
            db.execute("DELETE FROM series_latest WHERE model_name=? AND device=? AND target=?", series)
        else:
            db.execute(
                "UPDATE series_latest SET job_id=?, finished_at=?"
                " WHERE model_name=? AND device=? AND target=?",
                (newest[0], newest[1], *series),
            )
