from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from farm.errors import StoreError, UsageError
from farm.store import MIGRATIONS, ResultsStore


def _job(run_id: str, job_id: str, status: str = "ok", finished_at: float = 1.0) -> dict[str, object]:
    return {
        "job_id": job_id,
        "run_id": run_id,
        "model": {"name": "m", "sha256": "a" * 64},
        "device": "host-cpu",
        "unit": "u",
        "target": "ort/cpu",
        "status": status,
        "finished_at": finished_at,
        "latency_ms": {"p50": 1.0},
    }


def test_schema_is_versioned_and_reopens(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as store:
        assert store.schema_version == len(MIGRATIONS)
    with ResultsStore(path) as store:  # a second open migrates nothing and keeps data
        assert store.schema_version == len(MIGRATIONS)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_store_from_a_newer_farm_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    ResultsStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 5}")
    with pytest.raises(StoreError, match="newer farm"):
        ResultsStore(path)


def test_jobs_round_trip_and_latest_per_series(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "r.sqlite") as store:
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


def test_a_job_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "r.sqlite") as store:
        store.start_run("20260101-000000-aaaaaa", "submit", {})
        store.add_job("20260101-000000-aaaaaa", _job("20260101-000000-aaaaaa", "j1"))
        with pytest.raises(StoreError):  # the same job id twice violates the key: nothing of it lands
            store.add_job("20260101-000000-aaaaaa", _job("20260101-000000-aaaaaa", "j1"))
        assert len(store.jobs("20260101-000000-aaaaaa")) == 1
