"""The results store at the size of a lab's history: summary columns, bulky parts apart, and the
incremental state a scrape reads (watermark, duration aggregates, newest job per series), on
SQLite and on a real PostgreSQL alike."""

from __future__ import annotations

import copy
import itertools
import json
import random
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ondevice_farm.store
from ondevice_farm.analysis.sessions import sessions_document
from ondevice_farm.errors import UsageError
from ondevice_farm.gc.policy import JOB_PATHS as GC_PATHS
from ondevice_farm.job_parts import part_name, split_job, value_at
from ondevice_farm.metrics.collector import DEFAULT_DURATION_BUCKETS_S
from ondevice_farm.metrics.latest import JOB_PATHS as METRIC_PATHS
from ondevice_farm.store import MIGRATIONS, ResultsStore, StoreLocation
from ondevice_farm.store_schema import STORED_DURATION_BOUNDS_S
from ondevice_farm.store_sql import Database, PostgresDatabase, SqliteDatabase
from tests.pg_server import PostgresServer, postgres  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[2]
RECORDED_JOB = REPO / "tests/report/fixtures/host/tinynet_busy_host.json"
#: a run id per night
NIGHTS = [f"2026010{n}-000000-aaaaa{n}" for n in range(1, 5)]


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    """A real host job (op table and trace as the pipeline stores them), with five sessions of
    samples, energy and a paired baseline, so every summary column and bulky key has a value."""
    job: dict[str, Any] = json.loads(RECORDED_JOB.read_text())["jobs"][0]
    rng = random.Random(7)
    job["latency_ms"] = sessions_document([[1.0 + rng.random() for _ in range(40)] for _ in range(5)])
    job["energy"] = {"mj_per_inference": 1.5, "uncertainty_mj": 0.25, "source": "estimated"}
    job["paired_baseline"] = {"artifact_sha256": "b" * 64}
    return job


def _job(run_id: str, job_id: str, **fields: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "job_id": job_id,
        "run_id": run_id,
        "model": {"name": "m", "sha256": "a" * 64},
        "device": "host-cpu",
        "unit": "u",
        "target": "ort/cpu",
        "status": "ok",
        "started_at": 0.5,
        "finished_at": 1.0,
        "latency_ms": {"p50": 1.0},
    }
    job.update(fields)
    return job


def _recount(jobs: list[dict[str, Any]], bounds: tuple[float, ...]) -> list[tuple[Any, ...]]:
    """What job_duration_buckets answers, computed from the documents."""
    rows: dict[tuple[str, str], list[Any]] = {}
    for job in jobs:
        row = rows.setdefault((job["device"], job["status"]), [0, 0, 0.0, [0] * len(bounds)])
        row[0] += 1
        if job.get("started_at") is not None:
            took = job["finished_at"] - job["started_at"]
            row[1] += 1
            row[2] += took
            row[3] = [n + (took <= b) for n, b in zip(row[3], bounds, strict=True)]
    return [(d, s, n, t, pytest.approx(sec, abs=1e-5), c) for (d, s), (n, t, sec, c) in sorted(rows.items())]


def _typed(values: list[Any]) -> list[tuple[bool, Any]]:
    return [(isinstance(v, bool), v) for v in values]


def _newest(jobs: list[dict[str, Any]]) -> list[str]:
    """The newest successful job id per series, computed from the documents."""
    newest: dict[tuple[str, str, str], tuple[float, str]] = {}
    for job in jobs:
        if job["status"] == "ok":
            series = (job["model"]["name"], job["device"], job["target"])
            newest[series] = max(newest.get(series, (job["finished_at"], job["job_id"])),
                                 (job["finished_at"], job["job_id"]))  # fmt: skip
    return sorted(job_id for _, job_id in newest.values())


def test_the_stored_histogram_is_the_exporters() -> None:
    assert STORED_DURATION_BOUNDS_S == DEFAULT_DURATION_BUCKETS_S


def test_the_watermark_moves_with_every_job_added_or_removed(location: StoreLocation) -> None:
    with ResultsStore(location) as store:
        seen = {store.jobs_version()}
        store.start_run(NIGHTS[0], "nightly", {}, suite="s")
        store.start_run(NIGHTS[1], "nightly", {}, suite="s")
        for n in range(3):
            store.add_job(NIGHTS[n % 2], _job(NIGHTS[n % 2], f"j{n}", finished_at=float(n)))
            assert store.jobs_version() not in seen
            seen.add(store.jobs_version())
        assert store.jobs_version()[0] == 3
        with store.read_snapshot():
            before = store.jobs_version()
            store.latest_job_ids()
            store.job_duration_buckets(DEFAULT_DURATION_BUCKETS_S)
            assert store.jobs_version() == before  # reads move nothing
        store.finish_run(NIGHTS[0], "complete")
        store.finish_run(NIGHTS[1], "complete")
        seen.add(store.jobs_version())
        assert store.delete_runs([NIGHTS[0]]) == 1
        assert store.jobs_version() not in seen
        assert store.jobs_version()[0] == 1


def test_duration_buckets_after_adds_and_deletes_equal_a_recount(location: StoreLocation) -> None:
    rng = random.Random(3)
    bounds = DEFAULT_DURATION_BUCKETS_S
    written: dict[str, list[dict[str, Any]]] = {run: [] for run in NIGHTS}
    with ResultsStore(location) as store:
        for night, run_id in enumerate(NIGHTS):
            store.start_run(run_id, "nightly", {}, suite="s")
            for n in range(40):
                finished = night * 1e4 + n + rng.random()
                took = rng.choice([*bounds, 0.0, 5000.0, rng.uniform(0, 2000), rng.uniform(0, 3)])
                job = _job(
                    run_id,
                    f"{run_id}-{n}",
                    device=rng.choice(["pixel8", "iphone15", "host-cpu"]),
                    status=rng.choice(["ok", "ok", "failed"]),
                    finished_at=finished,
                    started_at=None if n % 9 == 0 else finished - took,
                )
                store.add_job(run_id, job)
                written[run_id].append(job)
            store.finish_run(run_id, "complete")
        # a bound exactly at a job's duration counts it, as Prometheus' `le` does
        assert store.job_duration_buckets(bounds) == _recount(
            [j for jobs in written.values() for j in jobs], bounds
        )
        assert store.delete_runs([NIGHTS[1], NIGHTS[3]], batch_jobs=7) == 2
        left = written[NIGHTS[0]] + written[NIGHTS[2]]
        assert store.job_duration_buckets(bounds) == _recount(left, bounds)
        some = (0.5, 60.0)  # stored bounds, fewer of them
        assert store.job_duration_buckets(some) == _recount(left, some)
        other = (0.25, 7.0, 3600.0)  # not stored: the store scans an index instead
        assert store.job_duration_buckets(other) == _recount(left, other)
        store.delete_runs([NIGHTS[0], NIGHTS[2]])
        assert store.job_duration_buckets(bounds) == []


def test_the_newest_job_of_a_series_falls_back_when_it_is_deleted(location: StoreLocation) -> None:
    with ResultsStore(location) as store:
        for night, run_id in enumerate(NIGHTS[:3]):
            store.start_run(run_id, "nightly", {}, suite="s")
            store.add_job(run_id, _job(run_id, f"a{night}", finished_at=10.0 + night))
            store.add_job(run_id, _job(run_id, f"other{night}", target="ort/xnnpack", finished_at=1.0))
            store.finish_run(run_id, "complete")
        store.start_run(NIGHTS[3], "nightly", {}, suite="s")
        store.add_job(NIGHTS[3], _job(NIGHTS[3], "failed-newest", status="failed", finished_at=99.0))
        store.add_job(NIGHTS[3], _job(NIGHTS[3], "a1-tie", finished_at=11.0))  # ties a1: larger id wins
        store.finish_run(NIGHTS[3], "complete")
        with store.read_snapshot():
            assert store.latest_job_ids() == ["a2", "other2"]
        store.delete_runs([NIGHTS[2]])
        with store.read_snapshot():
            assert store.latest_job_ids() == ["a1-tie", "other1"]
        store.delete_runs([NIGHTS[3]])
        assert store.latest_job_ids() == ["a1", "other1"]
        assert [j["job_id"] for j in store.latest_jobs()] == ["a1", "other1"]
        store.delete_runs([NIGHTS[0], NIGHTS[1]])
        assert store.latest_job_ids() == []


def test_a_job_reads_back_whole_and_its_summary_without_bulky_parts(
    location: StoreLocation, recorded: dict[str, Any]
) -> None:
    original = copy.deepcopy(recorded)
    with ResultsStore(location) as store:
        store.start_run(NIGHTS[0], "submit", {})
        store.add_job(NIGHTS[0], recorded)
        store.add_job(NIGHTS[0], _job(NIGHTS[0], "failed", status="failed", error="boom", finished_at=2e9))
        assert recorded == original  # the caller's document is not touched
        assert store.job(recorded["job_id"]) == recorded
        assert store.jobs(NIGHTS[0])[0] == recorded
        assert store.latest_jobs() == [recorded]
        summaries = store.run_job_summaries(NIGHTS[0])
        assert summaries[0] == split_job(recorded)[0]
        assert "trace_events" not in summaries[0] and "ops" not in summaries[0]
        assert "node_placement" not in summaries[0]["compile"]
        assert all("samples" not in r for r in summaries[0]["latency_ms"]["repeats"])
        assert summaries[0]["latency_ms"]["samples"] == recorded["latency_ms"]["samples"]  # verdicts'
        assert summaries[0]["latency_ms"]["repeats"][0]["p50"] == recorded["latency_ms"]["repeats"][0]["p50"]
        assert len(json.dumps(summaries[0])) < len(json.dumps(recorded)) / 5
        with pytest.raises(UsageError, match="no job"):
            store.job("nope")
        op_table = store.job(recorded["job_id"], parts=("ops",))  # the op table, not the trace
        assert op_table == {**split_job(recorded)[0], "ops": recorded["ops"]}
        assert store.job(recorded["job_id"], parts=()) == split_job(recorded)[0]


def test_values_at_paths_agree_with_the_whole_document(
    location: StoreLocation, recorded: dict[str, Any]
) -> None:
    """What the exporter and gc ask for, answered from columns, summaries and parts, equals the
    value in the document as written."""
    sparse = _job(NIGHTS[0], "sparse", latency_ms={"p50": 3}, reference={"passed": False}, energy="odd")
    with ResultsStore(location) as store:
        store.start_run(NIGHTS[0], "submit", {})
        store.add_job(NIGHTS[0], recorded)
        store.add_job(NIGHTS[0], sparse)
        paths = (
            *METRIC_PATHS,
            *GC_PATHS,
            "$.ops",
            "$.latency_ms.repeats[1].samples",
            "$.compile.node_placement",
        )
        fields = store.job_fields([recorded["job_id"], "sparse", "absent"], paths)
        assert set(fields) == {recorded["job_id"], "sparse"}
        for job in (recorded, sparse):  # true is not 1
            assert _typed(fields[job["job_id"]]) == _typed([value_at(job, p) for p in paths])
        assert fields[recorded["job_id"]][paths.index("$.ops")] == recorded["ops"]
        gc_view = {s.job_id: s for s in store.job_summaries(GC_PATHS)}
        assert gc_view[recorded["job_id"]].values == ["host-cpu", recorded["artifact_sha256"], "b" * 64]
        summary, parts = split_job(recorded)
        grouped: dict[str, dict[str, Any]] = {}
        for where, value in parts.items():
            grouped.setdefault(part_name(where), {})[where] = value
        stored = len(json.dumps(summary)) + sum(len(json.dumps(g)) for g in grouped.values())
        assert gc_view[recorded["job_id"]].document_bytes == stored


def test_summaries_page_by_finish_time_and_id(location: StoreLocation) -> None:
    with ResultsStore(location) as store:
        store.start_run(NIGHTS[0], "nightly", {})
        store.start_run(NIGHTS[1], "nightly", {})
        for n in range(23):  # finish times repeat: the id orders within one
            store.add_job(NIGHTS[0], _job(NIGHTS[0], f"j{n:02d}", finished_at=float(n // 4)))
            store.add_job(NIGHTS[1], _job(NIGHTS[1], f"k{n:02d}", finished_at=float(n // 4)))
        expected = [j["job_id"] for j in store.jobs(NIGHTS[0])]
        assert expected == sorted(expected, key=lambda i: (int(i[1:]) // 4, i))
        pages: list[list[dict[str, Any]]] = []
        after: tuple[float, str] | None = None
        for _ in range(10):  # bounded: a reader that never got past `after` would page forever
            page = store.run_job_summaries(NIGHTS[0], after=after, limit=5)
            if not page:
                break
            pages.append(page)
            after = (page[-1]["finished_at"], page[-1]["job_id"])
        assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
        assert [j["job_id"] for p in pages for j in p] == expected
        assert [
            j["job_id"] for j in itertools.islice(store.iter_run_job_summaries(NIGHTS[0], page=4), 50)
        ] == expected
        assert list(store.iter_run_job_summaries("no-such-run")) == []


def _old_database(location: StoreLocation) -> Database:
    if isinstance(location, Path):
        return SqliteDatabase(location, 5.0)
    return PostgresDatabase(str(location), 5.0)


def test_a_store_at_the_previous_schema_migrates_every_job_unchanged(
    location: StoreLocation, recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written by the previous farm (schema 3: whole documents in `jobs`) opens at the
    current schema with every job identical, and the scrape's state built from them."""
    previous = MIGRATIONS[:3]
    with monkeypatch.context() as patch:
        patch.setattr(ondevice_farm.store, "MIGRATIONS", previous)
        with ResultsStore(location) as store:
            assert store.schema_version == 3
    jobs = [
        recorded,
        _job(NIGHTS[0], "older", finished_at=5.0),
        _job(NIGHTS[0], "failed", status="failed", error="x", started_at=None, finished_at=2e9),
        {**_job(NIGHTS[0], "tinier", device="pixel8"), "trace_events": [{"name": "a"}]},
    ]
    db = _old_database(location)
    try:
        db.begin_write()
        db.execute(
            "INSERT INTO runs(run_id, created_at, kind, suite, status, document)"
            " VALUES (?, 0, 'nightly', 's', 'complete', '{}')",
            (NIGHTS[0],),
        )
        for job in jobs:
            db.execute(
                "INSERT INTO jobs(job_id, run_id, model_name, model_sha256, device, unit, target, status,"
                " error, started_at, finished_at, document) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (job["job_id"], NIGHTS[0], job["model"]["name"], job["model"]["sha256"], job["device"],
                 job.get("unit"), job["target"], job["status"], job.get("error"), job.get("started_at"),
                 job["finished_at"], json.dumps(job)),
            )  # fmt: skip
        db.commit()
    finally:
        db.close()
    with ResultsStore(location) as store:
        assert store.schema_version == len(MIGRATIONS)
        by_id = {j["job_id"]: j for j in store.jobs(NIGHTS[0])}
        assert by_id == {j["job_id"]: j for j in jobs}
        assert all(store.job(j["job_id"]) == j for j in jobs)
        assert "trace_events" not in store.run_job_summaries(NIGHTS[0])[0]
        assert store.jobs_version()[0] == 4
        assert sorted(store.latest_job_ids()) == _newest(jobs)
        assert store.job_duration_buckets(DEFAULT_DURATION_BUCKETS_S) == _recount(
            jobs, DEFAULT_DURATION_BUCKETS_S
        )
        version = store.jobs_version()
        store.add_job(NIGHTS[0], _job(NIGHTS[0], "new", finished_at=3e9))
        assert store.jobs_version() != version
        assert "new" in store.latest_job_ids()


# -- query plans: the scrape and gc read indexes, never every job row (SQLite) ----------------------


class Traced:
    """Every statement the store sends to SQLite, with its arguments filled in."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def add(self, statement: str) -> None:
        self.statements.append(statement)

    def take(self) -> list[str]:
        taken, self.statements = self.statements, []
        return taken


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[Traced]:
    trace = Traced()
    connect = sqlite3.connect

    def tracing(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connection.set_trace_callback(trace.add)
        return connection

    monkeypatch.setattr(sqlite3, "connect", tracing)
    yield trace


def _plans(path: Path, statements: list[str]) -> list[str]:
    """The query plan lines of every SELECT among `statements` that reads `jobs`."""
    lines: list[str] = []
    with sqlite3.connect(path) as db:
        for statement in statements:
            if statement.lstrip().upper().startswith("SELECT") and " jobs" in statement:
                plan = db.execute("EXPLAIN QUERY PLAN " + statement).fetchall()
                lines += [f"{row[3]}  <-  {statement[:80]}" for row in plan]
    return lines


def test_the_scrape_and_gc_read_indexes_not_every_job(tmp_path: Path, traced: Traced) -> None:
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as store:
        for night, run_id in enumerate(NIGHTS):
            store.start_run(run_id, "nightly", {}, suite="s")
            for n in range(30):
                job = _job(run_id, f"{run_id}-{n}", model={"name": f"m{n % 10}", "sha256": "a" * 64},
                           finished_at=night * 100.0 + n)  # fmt: skip
                store.add_job(run_id, job)
            store.finish_run(run_id, "complete")
        traced.take()
        with store.read_snapshot():  # what a scrape after a job landed reads
            store.jobs_version()
            ids = store.latest_job_ids()
            store.job_fields(ids, METRIC_PATHS)
            store.job_duration_buckets(DEFAULT_DURATION_BUCKETS_S)
            store.last_finished_runs("nightly")
        scrape = _plans(path, traced.take())
        store.run_job_summaries(NIGHTS[1], after=(105.0, f"{NIGHTS[1]}-5"), limit=10)
        paged = _plans(path, traced.take())
        store.job_summaries(GC_PATHS)
        gc = _plans(path, traced.take())
        assert store.delete_runs([NIGHTS[0]], batch_jobs=8) == 1
        deletes = traced.take()
    # the small state tables (a row per series, per device and status) are read whole; jobs never
    # (a search of an index prefix such as status='ok' reads every ok job: only job ids may be sought)
    on_jobs = [line for line in scrape if re.search(r"\b(SCAN|SEARCH) jobs\b", line)]
    assert on_jobs and all("(job_id=?)" in line for line in on_jobs), scrape
    assert paged and all("SCAN" not in line and "TEMP B-TREE" not in line for line in paged), paged
    assert any("jobs_by_run" in line for line in paged), paged
    assert gc and all("SCAN jobs USING COVERING INDEX jobs_retention" in line for line in gc), gc
    # 30 jobs, 8 a transaction: four write transactions, each removing at most 8 jobs
    assert sum(1 for s in deletes if s == "BEGIN IMMEDIATE") == 4
    removed = [s for s in deletes if s.startswith("DELETE FROM jobs WHERE")]
    assert [s.count(",") + 1 for s in removed] == [8, 8, 8, 6]
