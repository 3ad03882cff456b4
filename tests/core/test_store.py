from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ondevice_farm.errors import StoreError, UsageError
from ondevice_farm.store import MIGRATIONS, ResultsStore, StoreLocation
from tests.pg_server import PostgresServer, postgres  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[2]


def _job(run_id: str, job_id: str, status: str = "ok", finished_at: float = 1.0) -> dict[str, object]:
    return {
        "job_id": job_id,
        "run_id": run_id,
        "model": {"name": "m", "sha256": "a" * 64},
        "device": "host-cpu",
        "unit": "u",
        "target": "ort/cpu",
        "status": status,
        "started_at": finished_at - 0.5,
        "finished_at": finished_at,
        "latency_ms": {"p50": 1.0},
    }


def test_schema_is_versioned_and_reopens(location: StoreLocation) -> None:
    with ResultsStore(location) as store:
        assert store.schema_version == len(MIGRATIONS)
    with ResultsStore(location) as store:  # a second open migrates nothing and keeps data
        assert store.schema_version == len(MIGRATIONS)
    if isinstance(location, Path):
        with sqlite3.connect(location) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_sqlite_store_from_a_newer_farm_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    ResultsStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 5}")
    with pytest.raises(StoreError, match="newer farm"):
        ResultsStore(path)


def test_a_postgres_store_from_a_newer_farm_is_refused(postgres: PostgresServer) -> None:  # noqa: F811
    import psycopg

    url = postgres.new_database()
    ResultsStore(url).close()
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("UPDATE farm_schema SET version = version + 5")
    with pytest.raises(StoreError, match="newer farm"):
        ResultsStore(url)


def test_an_unreachable_postgres_is_one_error_without_the_password() -> None:
    with pytest.raises(StoreError, match="cannot open the results store") as raised:
        ResultsStore("postgresql://farm:s3cret@127.0.0.1:1/none", busy_timeout_s=2)
    assert "s3cret" not in str(raised.value)


def test_jobs_round_trip_and_latest_per_series(location: StoreLocation) -> None:
    with ResultsStore(location) as store:
        store.start_run("20260101-000000-aaaaaa", "submit", {"model": {"name": "m"}})
        store.add_job("20260101-000000-aaaaaa", _job("20260101-000000-aaaaaa", "j1", finished_at=1.0))
        store.finish_run("20260101-000000-aaaaaa", "complete")
        store.start_run("20260102-000000-bbbbbb", "submit", {"model": {"name": "m"}})
        store.add_job("20260102-000000-bbbbbb", _job("20260102-000000-bbbbbb", "j2", finished_at=2.0))
        store.add_job("20260102-000000-bbbbbb", _job("20260102-000000-bbbbbb", "j3", "failed", 3.0))
        assert [j["job_id"] for j in store.latest_jobs()] == ["j2"]  # newest *successful* job
        assert store.job_counts("20260102-000000-bbbbbb") == {"ok": 1, "failed": 1}
        assert store.resolve_run_id("20260102") == "20260102-000000-bbbbbb"
        with pytest.raises(UsageError, match="ambiguous"):
            store.resolve_run_id("2026010")
        with pytest.raises(UsageError, match="no run"):
            store.resolve_run_id("1999")
        with pytest.raises(UsageError, match="no run"):  # LIKE wildcards in a prefix are literal
            store.resolve_run_id("2026010_")
        assert [r.run_id for r in store.runs(limit=1)] == ["20260102-000000-bbbbbb"]
        assert store.run("20260101-000000-aaaaaa").status == "complete"
        assert [r.run_id for r in store.running_runs()] == ["20260102-000000-bbbbbb"]
        assert store.mark_interrupted("20260102-000000-bbbbbb")
        assert not store.mark_interrupted("20260102-000000-bbbbbb")  # only a running run


def test_what_the_metrics_exporter_reads_agrees_on_both_backends(location: StoreLocation) -> None:
    with ResultsStore(location) as store:
        store.start_run("20260101-000000-aaaaaa", "nightly", {}, suite="s")
        before = store.jobs_version()
        store.add_job("20260101-000000-aaaaaa", _job("20260101-000000-aaaaaa", "j1", finished_at=10.0))
        store.add_job("20260101-000000-aaaaaa", _job("20260101-000000-aaaaaa", "j2", finished_at=20.0))
        store.add_job("20260101-000000-aaaaaa", _job("20260101-000000-aaaaaa", "j3", "failed", 30.0))
        assert store.jobs_version() != before
        store.finish_run("20260101-000000-aaaaaa", "complete")
        with store.read_snapshot():
            assert store.latest_job_ids() == ["j2"]
            fields = store.job_fields(["j1", "j2"], ("$.latency_ms.p50", "$.model.name", "$.absent.key"))
            assert fields == {"j1": [1.0, "m", None], "j2": [1.0, "m", None]}
            buckets = store.job_duration_buckets((0.1, 1.0))
            assert sorted(buckets) == [
                ("host-cpu", "failed", 1, 1, 0.5, [0, 1]),
                ("host-cpu", "ok", 2, 2, 1.0, [0, 2]),
            ]
            assert list(store.last_finished_runs("nightly")) == ["s"]


def test_a_job_is_written_whole_or_not_at_all(
    location: StoreLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ondevice_farm.store as store_module

    with ResultsStore(location) as store:
        store.start_run("20260101-000000-aaaaaa", "submit", {})
        store.add_job("20260101-000000-aaaaaa", _job("20260101-000000-aaaaaa", "j1"))
        before = store.jobs_version()

        def parts_fail(*_: object) -> None:  # after the job's row, before its parts
            raise RuntimeError("the disk went away")

        monkeypatch.setattr(store_module, "insert_parts", parts_fail)
        with pytest.raises(RuntimeError):
            store.add_job("20260101-000000-aaaaaa", _job("20260101-000000-aaaaaa", "j2"))
        assert [j["job_id"] for j in store.jobs("20260101-000000-aaaaaa")] == ["j1"]
        assert store.jobs_version() == before


OPEN_AND_WRITE = """
import sys
from ondevice_farm.store import ResultsStore
location = sys.argv[1]
with ResultsStore(location) as store:
    store.start_run(sys.argv[2], "submit", {})
"""


def test_concurrent_first_opens_migrate_once(location: StoreLocation) -> None:
    """Eight processes open a new store at the same instant: each opens it, none sees "table runs
    already exists" or "database is locked", and the schema is migrated once."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AND_WRITE, str(location), f"20260101-000000-{n:06d}"],
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(8)
    ]
    errors = [p.communicate(timeout=120)[1] for p in processes]
    assert [p.returncode for p in processes] == [0] * 8, errors
    with ResultsStore(location) as store:
        assert store.schema_version == len(MIGRATIONS)
        assert len(store.runs(limit=100)) == 8


def test_a_runs_job_rows_page_as_its_summaries_do_on_both_backends(location: StoreLocation) -> None:
    run_id = "20260103-000000-cccccc"
    with ResultsStore(location) as store:
        store.start_run(run_id, "nightly", {"model": {"name": "m"}})
        for index in range(5):
            job = _job(run_id, f"j{index}", "failed" if index == 3 else "ok", finished_at=10.0 + index % 2)
            job["requested"] = f"host-cpu:u{index}"
            if index == 3:
                job["error"], job["latency_ms"] = "the unit disconnected", {}
            store.add_job(run_id, job)
        first = store.run_job_rows(run_id, limit=3)
        rest = store.run_job_rows(run_id, after=(first[-1]["finished_at"], first[-1]["job_id"]), limit=3)
        summaries = store.run_job_summaries(run_id, limit=10)
    rows = first + rest
    assert [r["job_id"] for r in rows] == [s["job_id"] for s in summaries] and len(rows) == 5
    keys = ("job_id", "finished_at", "target", "requested", "device", "status")
    for row, summary in zip(rows, summaries, strict=True):
        assert {k: row[k] for k in keys} == {k: summary[k] for k in keys}
        assert row["model"] == {"name": summary["model"]["name"]} and row["error"] == summary.get("error")
        assert row.get("latency_ms") == ({"p50": 1.0} if summary["status"] == "ok" else None)
