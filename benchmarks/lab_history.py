"""Months of history for benchmarks/lab_scale.py: the lab's stored nightlies copied in SQL, older.

Each copy k (1..K) of every run of the given suites gets new ids (`<run>~h<k>`, its jobs
`<run>~h<k>-<hex>~h<k>`) and is dated
k * days / K days earlier (runs' created/finished, jobs' started/finished, in their columns and
summary documents). The first `parts_copies` copies take each job's bulky parts with them, the rest
are summary rows only: a 200-op job's parts are ~90 kB, so a million jobs with all their parts
would be ~90 GB, more than this machine's disk (the scrape reads none of them; gc deletes what
there is). So a million rows cost minutes of
PostgreSQL instead of a million `add_job` calls, and the copies are jobs the lab itself stored.
The state the store keeps for the scrape (store_state.py) is then brought up to date as the store
would have kept it: the watermark's job count, and the duration aggregates recomputed from the jobs
table with the store's own bounds. Each series' newest job is an original (the copies are older),
so `series_latest` stands.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ondevice_farm.store_schema import MICROS_PER_S, STORED_DURATION_BOUNDS_S
from ondevice_farm.store_state import WATERMARK_ROW

DAY_S = 86400.0
COPY_MARK = "~h"


def _columns(db: Any, table: str) -> list[str]:
    rows = db.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return [str(r[0]) for r in rows]


def _renamed(column: str, mark: str) -> str:
    """A job id or document of a copy, in text (`j`: the original job's row): its run id marked
    wherever it is, then the job id so changed marked too (a job id starts with its run's id, so
    the copy's job id is `<run>~hK-<hex>~hK`)."""
    moved = f"replace(j.job_id, j.run_id, j.run_id || {mark})"
    return f"replace(replace({column}, j.run_id, j.run_id || {mark}), {moved}, {moved} || {mark})"


def _redated(document: str, field: str, shift: str) -> str:
    """The document's first `"field": <number>` shifted: the top-level one, which a job document
    has before its attempts' (controller/job_writer.py puts the times right after the job's ids).
    A job without the time has `null` there, which the pattern does not match (the coalesce only
    keeps the replacement from being NULL, which would make the whole document NULL)."""
    key = f'\'"{field}": '
    return (
        f"regexp_replace({document}, {key}[-+0-9.eE]+', {key}' || coalesce((j.{field} - {shift})::text, ''))"
    )


def copy_history(
    db: Any, suites: list[str], target_rows: int, days: float, parts_copies: int = 1
) -> tuple[int, float]:
    """Copies runs of `suites` until the jobs table holds at least `target_rows`; (copies, seconds)."""
    began = time.perf_counter()
    source = db.execute(
        "SELECT count(*) FROM jobs j JOIN runs r ON r.run_id = j.run_id WHERE r.suite = ANY(%s)",
        (suites,),
    ).fetchone()[0]
    stored = db.execute("SELECT count(*) FROM jobs").fetchone()[0]
    if source == 0:
        raise RuntimeError(f"no stored jobs of {suites} to copy")
    copies = max(0, -(-(target_rows - stored) // source))
    run_cols, job_cols = _columns(db, "runs"), _columns(db, "jobs")
    for k in range(1, copies + 1):
        shift = f"{k * days / copies * DAY_S!r}"
        mark = f"'{COPY_MARK}{k}'"
        run_values = {
            "run_id": f"run_id || {mark}",
            "created_at": f"created_at - {shift}",
            "finished_at": f"finished_at - {shift}",
        }
        # text functions, not jsonb: parsing and writing back each ~11 kB summary held the copy
        # at ~30,000 rows a minute (a million rows: over half an hour)
        document = _redated(_redated(_renamed("j.document", mark), "started_at", shift), "finished_at", shift)
        job_values = {
            "job_id": _renamed("j.job_id", mark),
            "run_id": f"j.run_id || {mark}",
            "started_at": f"j.started_at - {shift}",
            "finished_at": f"j.finished_at - {shift}",
            "document": document,
        }
        originals = f"SELECT run_id FROM runs WHERE suite = ANY(%s) AND run_id NOT LIKE '%%{COPY_MARK}%%'"
        with db.transaction():
            db.execute(
                f"INSERT INTO runs ({', '.join(run_cols)}) SELECT "
                + ", ".join(run_values.get(c, c) for c in run_cols)
                + f" FROM runs WHERE run_id IN ({originals})",
                (suites,),
            )
            db.execute(
                f"INSERT INTO jobs ({', '.join(job_cols)}) SELECT "
                + ", ".join(job_values.get(c, f"j.{c}") for c in job_cols)
                + f" FROM jobs j WHERE j.run_id IN ({originals})",
                (suites,),
            )
            if k > parts_copies:
                continue
            db.execute(
                "INSERT INTO job_parts (job_id, part, document)"
                f" SELECT {_renamed('p.job_id', mark)}, p.part, p.document"
                f" FROM job_parts p JOIN jobs j ON j.job_id = p.job_id WHERE j.run_id IN ({originals})",
                (suites,),
            )
        if k == 1:
            _check_copy(db, f"{COPY_MARK}1")
    _recount(db)
    return copies, time.perf_counter() - began


def _check_copy(db: Any, mark: str) -> None:
    """A few jobs of a copy: each document names the copy's own ids and times, as its columns do."""
    rows = db.execute(
        "SELECT job_id, run_id, started_at, finished_at, document FROM jobs WHERE run_id LIKE %s LIMIT 20",
        (f"%{mark}",),
    ).fetchall()
    for job_id, run_id, started_at, finished_at, text in rows:
        document = json.loads(text)
        named = (document["job_id"], document["run_id"], document.get("started_at"), document["finished_at"])
        if named != (job_id, run_id, started_at, finished_at):
            raise RuntimeError(f"a copied job's document disagrees with its row: {named} != {job_id, run_id}")
    if not rows:
        raise RuntimeError(f"no job of the copy {mark} found")


def _recount(db: Any) -> None:
    """The scrape's aggregates as the store's writes would have kept them (store_state.py)."""
    bucket = "CASE"
    for index, bound in enumerate(STORED_DURATION_BOUNDS_S):
        bucket += f" WHEN finished_at - started_at <= {bound!r} THEN {index}"
    bucket += f" ELSE {len(STORED_DURATION_BOUNDS_S)} END"
    micros = f"round(((finished_at - started_at) * {MICROS_PER_S})::numeric)"
    with db.transaction():
        db.execute(
            "UPDATE jobs_watermark SET jobs = (SELECT count(*) FROM jobs), changes = changes + 1"
            " WHERE id = %s",
            (WATERMARK_ROW,),
        )
        db.execute("DELETE FROM job_durations")
        db.execute("DELETE FROM job_duration_counts")
        db.execute(
            "INSERT INTO job_durations(device, status, jobs, timed, micros)"
            " SELECT device, status, count(*), count(started_at),"
            f" coalesce(sum(CASE WHEN started_at IS NULL THEN 0 ELSE {micros} END), 0)"
            " FROM jobs GROUP BY device, status"
        )
        db.execute(
            "INSERT INTO job_duration_counts(device, status, bucket, jobs)"
            f" SELECT device, status, {bucket}, count(*) FROM jobs WHERE started_at IS NOT NULL"
            f" GROUP BY device, status, {bucket}"
        )
