"""`/metrics` over HTTP as `farm serve` starts it: loopback, a port of its own, stopped cleanly."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from farm.errors import UsageError
from farm.metrics.server import start_metrics_server

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
