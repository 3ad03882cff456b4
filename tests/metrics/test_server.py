"""`/metrics` over HTTP as `farm serve` starts it: loopback, a port of its own, stopped cleanly."""

from __future__ import annotations

import gzip
import shutil
import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ondevice_farm.errors import UsageError
from ondevice_farm.metrics.collector import FarmCollector, farm_registry
from ondevice_farm.metrics.server import start_metrics_server
from ondevice_farm.store import ResultsStore

from .conftest import HostFleet, RealRun, http_get


def test_serves_metrics_on_loopback_and_stops(tmp_path: Path, real_run: RealRun) -> None:
    fleet = HostFleet()
    server = start_metrics_server(real_run.store_path, port=0, fleet=fleet)
    try:
        assert server.host == "127.0.0.1" and server.port > 0
        status, body = http_get(server.url)
        assert status == 200
        names = {family.name for family in text_string_to_metric_families(body.decode())}
        assert {"farm_inference_latency_seconds", "farm_device_up", "farm_jobs"} <= names
        assert "process_cpu_seconds_total" not in body.decode()  # a registry of its own, not the global one
        assert http_get(server.url.replace("/metrics", "/nothing-here"))[0] == 404
    finally:
        server.stop()
        fleet.close()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port), timeout=2):
        pass


def test_a_taken_port_is_a_usage_error_with_a_hint(real_run: RealRun) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UsageError) as raised:
            start_metrics_server(real_run.store_path, port=port)
    assert str(port) in raised.value.message and "--metrics-port" in raised.value.hint


def test_as_a_context_manager(tmp_path: Path) -> None:
    with start_metrics_server(tmp_path / "empty.sqlite", port=0) as server:
        status, body = http_get(server.url)
    assert status == 200 and b"farm_store_up 1.0" in body


def _samples(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _get(url: str, gzipped: bool) -> str:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gzipped else {})
    with urllib.request.urlopen(request, timeout=5) as response:
        body = response.read()
        assert (response.headers.get("Content-Encoding") == "gzip") == gzipped
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return (gzip.decompress(body) if gzipped else body).decode()


def test_served_text_is_what_the_collector_collects_and_follows_new_jobs(
    tmp_path: Path, real_run: RealRun
) -> None:
    """The server formats the bulk of a scrape itself and reuses it between scrapes; it must say
    exactly what prometheus_client would, and change as soon as a job lands or the fleet moves."""
    store_path = tmp_path / "results.sqlite"
    shutil.copy(real_run.store_path, store_path)
    fleet = HostFleet()
    try:
        with start_metrics_server(store_path, port=0, fleet=fleet) as server:
            reference = farm_registry(FarmCollector(store_path, fleet))
            for gzipped in (False, True, False):
                assert _samples(_get(server.url, gzipped)) == _samples(generate_latest(reference).decode())
            with ResultsStore(store_path) as store:
                job = {
                    **real_run.job,
                    "job_id": "another-job",
                    "model": {"name": "othernet", "sha256": "0" * 64},
                }
                store.add_job(real_run.document["run_id"], job)
            fleet.queue_jobs = 3
            served = _samples(_get(server.url, gzipped=True))
            assert served == _samples(generate_latest(reference).decode())
            assert ("farm_queue_jobs", (), 3.0) in served
            assert any(
                name == "farm_reference_state" and ("model", "othernet") in labels
                for name, labels, _ in served
            )
    finally:
        fleet.close()
