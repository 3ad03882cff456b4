"""`farm serve` serves the reports of stored runs beside /metrics."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from ondevice_farm.metrics.server import start_metrics_server
from ondevice_farm.reports.web import reports_app
from tests.report.conftest import HostRuns


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_stored_runs_are_served_as_html_reports(host_runs: HostRuns) -> None:
    home = host_runs.home
    server = start_metrics_server(
        home / "results.sqlite",
        "127.0.0.1",
        0,
        others=reports_app(home / "results.sqlite", home / "artifacts"),
    )
    base = f"http://127.0.0.1:{server.port}"
    try:
        status, index = _get(f"{base}/runs/")
        first, second = host_runs.first["run_id"], host_runs.second["run_id"]
        assert status == 200 and first in index and second in index
        status, page = _get(f"{base}/runs/{first}")
        assert status == 200 and page.lower().startswith("<!doctype html")
        assert first in page and "Side by side" in page
        status, page = _get(f"{base}/runs/{first}?against={second}")
        assert status == 200 and second in page
        assert _get(f"{base}/runs/no-such-run")[0] == 404
        status, metrics = _get(f"{base}/metrics")
        assert status == 200 and "farm_inference_latency_seconds" in metrics
    finally:
        server.stop()


@pytest.mark.parametrize("path", ["/elsewhere", "/runs/../../etc/passwd"])
def test_other_paths_are_not_found(host_runs: HostRuns, path: str) -> None:
    home = host_runs.home
    server = start_metrics_server(
        home / "results.sqlite",
        "127.0.0.1",
        0,
        others=reports_app(home / "results.sqlite", home / "artifacts"),
    )
    try:
        assert _get(f"http://127.0.0.1:{server.port}{path}")[0] == 404
    finally:
        server.stop()
