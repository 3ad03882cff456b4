"""What `farm gc` reads of and removes from the results store, the same on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ondevice_farm.config import FarmHome
from ondevice_farm.gc.policy import JOB_PATHS, RetentionPolicy
from ondevice_farm.gc.schedule import collect_once
from ondevice_farm.store import ResultsStore, StoreLocation
from tests.pg_server import PostgresServer, postgres  # noqa: F401 - the fixture

DAY_S = 86400.0


def job(run_id: str, number: int, status: str = "ok", baseline: str | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "job_id": f"{run_id}-{number}",
        "model": {"name": "m", "sha256": "a" * 64},
        "device": "host-cpu",
        "requested": "host-cpu:u1",
        "target": "ort/cpu",
        "status": status,
        "artifact_sha256": f"{number:064x}",
        "finished_at": time.time(),
    }
    if baseline is not None:
        document["paired_baseline"] = {"artifact_sha256": baseline, "run_id": "x"}
    return document


def fill(location: StoreLocation) -> list[str]:
    """Five nightlies of one job, one run still running; the middle night's job failed."""
    run_ids = [f"2026010{n}-000000-aaaaaa" for n in range(1, 7)]
    with ResultsStore(location) as store:
        for night, run_id in enumerate(run_ids):
            store.start_run(run_id, "nightly", {"models": [{"sha256": "a" * 64}]}, suite="s")
            if night < 5:
                status = "failed" if night == 2 else "ok"
                store.add_job(
                    run_id, job(run_id, night, status, baseline=f"{night - 1:064x}" if night else None)
                )
                store.finish_run(run_id, "complete")
    return run_ids


def test_job_summaries_and_deleting_runs(location: StoreLocation, tmp_path: Path) -> None:
    run_ids = fill(location)
    with ResultsStore(location) as store:
        summaries = sorted(store.job_summaries(JOB_PATHS), key=lambda s: s.run_id)
        assert [s.run_id for s in summaries] == run_ids[:5]
        first, second = summaries[0], summaries[1]
        assert first.values == ["host-cpu:u1", f"{0:064x}", None]
        assert second.values == ["host-cpu:u1", f"{1:064x}", f"{0:064x}"]
        assert first.document_bytes > 100 and (first.status, summaries[2].status) == ("ok", "failed")
        # a running run is never removed, even when asked
        assert store.delete_runs([run_ids[0], run_ids[5]]) == 1
        assert {r.run_id for r in store.runs(limit=100)} == set(run_ids[1:])
        assert store.jobs(run_ids[0]) == []

    # all of them old: the newest 2 successes (nights 3, 4) and the newest job stay, the running run too
    home = FarmHome(tmp_path / "home")
    now = time.time() + 365 * DAY_S
    outcome = collect_once(home, location, RetentionPolicy(keep_runs=2, keep_days=7), now_s=now)
    assert outcome.result is not None
    assert {r.name for r in outcome.result.removed} == {run_ids[1], run_ids[2]}
    with ResultsStore(location) as store:
        assert {r.run_id for r in store.runs(limit=100)} == {run_ids[3], run_ids[4], run_ids[5]}
