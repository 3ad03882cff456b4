"""/metrics over a PostgreSQL store says what it says over SQLite: the same real job, its
variants and a nightly, written through the store's API to both, scraped by the same collector."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ondevice_farm.metrics.collector import FarmCollector, farm_registry
from ondevice_farm.store import ResultsStore, StoreLocation, new_run_id
from tests.pg_server import PostgresServer, postgres  # noqa: F401 - the fixture

from .conftest import RealRun


def _fill(location: StoreLocation, job: dict[str, Any]) -> None:
    slower = copy.deepcopy(job)
    slower.update(job_id="slower", finished_at=job["finished_at"] + 10)
    slower["latency_ms"] = {**job["latency_ms"], "p50": job["latency_ms"]["p50"] * 2}
    failed = {**copy.deepcopy(job), "job_id": "failed", "status": "failed", "error": "boom"}
    with ResultsStore(location) as store:
        store.start_run("20260101-000000-aaaaaa", "submit", {})
        for each in (job, slower, failed):
            store.add_job("20260101-000000-aaaaaa", each)
        store.finish_run("20260101-000000-aaaaaa", "complete")
        store.start_run("20260102-000000-bbbbbb", "nightly", {}, suite="smoke")
        store.finish_run("20260102-000000-bbbbbb", "complete")


def _samples(location: StoreLocation) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    collector = FarmCollector(location)
    try:
        text = generate_latest(farm_registry(collector)).decode()
    finally:
        collector.close()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_agree_on_sqlite_and_postgresql(
    tmp_path: Path,
    real_run: RealRun,
    postgres: PostgresServer,  # noqa: F811
) -> None:
    job = {**real_run.job, "job_id": new_run_id() + "-ok", "finished_at": time.time()}
    url = postgres.new_database()
    _fill(tmp_path / "results.sqlite", job)
    _fill(url, job)
    on_sqlite, on_postgres = _samples(tmp_path / "results.sqlite"), _samples(url)
    assert on_sqlite.keys() == on_postgres.keys()
    # when the nightly finished: each store stamped its own write
    timed = {k for k in on_sqlite if "nightly" in k[0] or "scrape" in k[0]}
    assert {k: v for k, v in on_sqlite.items() if k not in timed} == {
        k: v for k, v in on_postgres.items() if k not in timed
    }
    p50 = [
        v
        for (name, labels), v in on_postgres.items()
        if name == "farm_inference_latency_seconds" and ("quantile", "0.5") in labels
    ]
    # the newest ok job of the series: "slower"; ms to s in whichever order the collector does it
    assert p50 == [pytest.approx(job["latency_ms"]["p50"] * 2 / 1000, rel=1e-12)]
    assert on_postgres[("farm_store_up", ())] == 1.0
