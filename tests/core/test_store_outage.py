"""The store may blink: a write waits out a busy SQLite file or a PostgreSQL restart, a dropped
connection is made again, and a job id is written once however often its write is tried."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from ondevice_farm.errors import StoreError
from ondevice_farm.store import ResultsStore
from ondevice_farm.store_retry import StoreRetry
from tests.core.test_store import _job
from tests.pg_server import PostgresServer, postgres  # noqa: F401 - the fixture

QUICK = StoreRetry(outage_s=60.0, first_backoff_s=0.05, max_backoff_s=0.5)


def hold_write_lock(path: Path, held_s: float) -> threading.Thread:
    """Another connection holds SQLite's write lock for `held_s` (as `farm gc` does while it
    removes a batch), longer than the store's busy timeout."""
    locked = threading.Event()

    def hold() -> None:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        locked.set()
        time.sleep(held_s)
        db.execute("ROLLBACK")
        db.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert locked.wait(10)
    return thread


def test_a_write_waits_out_a_sqlite_lock_held_past_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    with ResultsStore(path, busy_timeout_s=0.1, retry=QUICK) as store:
        store.start_run("r1", "submit", {})
        holder = hold_write_lock(path, held_s=1.0)
        store.add_job("r1", _job("r1", "j1"))
        holder.join()
        assert store.health.retries > 0 and store.health.up and store.health.pending_writes == 0
        assert [j["job_id"] for j in store.jobs("r1")] == ["j1"]


def test_a_write_gives_up_after_the_outage_it_may_wait(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    patient_s = 0.5
    with ResultsStore(
        path, busy_timeout_s=0.1, retry=StoreRetry(outage_s=patient_s, first_backoff_s=0.05)
    ) as store:
        store.start_run("r1", "submit", {})
        holder = hold_write_lock(path, held_s=3.0)
        began = time.monotonic()
        with pytest.raises(StoreError, match="took no write for 0s"):
            store.add_job("r1", _job("r1", "j1"))
        assert time.monotonic() - began < 2.5
        assert not store.health.up
        holder.join()


def test_a_job_and_a_run_are_written_once_however_often_their_write_is_tried(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "results.sqlite") as store:
        store.start_run("r1", "submit", {"a": 1})
        store.start_run("r1", "submit", {"a": 1})  # a retry whose first commit went through
        store.add_job("r1", _job("r1", "j1"))
        store.add_job("r1", _job("r1", "j1"))
        assert [j["job_id"] for j in store.jobs("r1")] == ["j1"]
        assert store.jobs_version()[0] == 1 and store.job_counts("r1") == {"ok": 1}
        assert len(store.runs()) == 1


def test_a_postgresql_restart_mid_write_loses_nothing_and_the_store_reconnects(
    postgres: PostgresServer,  # noqa: F811 - the fixture
) -> None:
    with ResultsStore(postgres.new_database(), busy_timeout_s=2.0, retry=QUICK) as store:
        store.start_run("r1", "nightly", {})
        store.add_job("r1", _job("r1", "before", finished_at=1.0))
        postgres.stop()
        errors: list[BaseException] = []

        def write() -> None:
            try:
                store.add_job("r1", _job("r1", "during", finished_at=2.0))
            except BaseException as exc:  # the test's thread: said below
                errors.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.monotonic() + 30
        while store.health.up and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not store.health.up and store.health.pending_writes == 1
        time.sleep(1.0)  # down for a while: the write keeps trying
        assert writer.is_alive()
        postgres.start()
        writer.join(timeout=60)
        assert not writer.is_alive() and errors == []
        assert store.health.up and store.health.pending_writes == 0
        # reads and writes go on through the same store object: its connection was made again
        assert [j["job_id"] for j in store.jobs("r1")] == ["before", "during"]
        store.finish_run("r1", "complete")
        assert store.run("r1").status == "complete"


def test_a_dropped_postgresql_connection_is_made_again_for_reads_and_writes(
    postgres: PostgresServer,  # noqa: F811 - the fixture
) -> None:
    import psycopg

    url = postgres.new_database()
    with ResultsStore(url, retry=QUICK) as store:
        store.start_run("r1", "nightly", {})
        with psycopg.connect(url, autocommit=True) as admin:
            dropped = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        assert dropped and all(row[0] for row in dropped)
        assert store.jobs("r1") == []  # the read finds the connection gone and makes it again
        store.add_job("r1", _job("r1", "j1"))
        assert [j["job_id"] for j in store.jobs("r1")] == ["j1"]
