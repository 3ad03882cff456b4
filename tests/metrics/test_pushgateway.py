"""`farm nightly --pushgateway`: a run's summary pushed to Debian's prometheus-pushgateway on loopback."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ondevice_farm.errors import FarmError
from ondevice_farm.metrics.pushgateway import push_run_summary
from ondevice_farm.run_tally import RunTally

from .conftest import RealRun, binary, free_port, http_get, wait_until_ready

GROUP = {"job": "farm_nightly", "suite": "mobile/smoke"}


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[str]:
    executable = binary("prometheus-pushgateway", "prometheus-pushgateway")
    port = free_port()
    process = subprocess.Popen(
        # Debian's build persists to /var/lib/prometheus/pushgateway.data by default, which would
        # bring back what earlier runs pushed: a file of this test's own
        [
            executable,
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
            f"--persistence.file={tmp_path / 'pushgateway.data'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "pushgateway.log").open("wb"),
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(f"{url}/-/ready", process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _pushed(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body = http_get(f"{url}/metrics")
    assert status == 200
    return {
        (
            s.name,
            tuple(sorted((k, v) for k, v in s.labels.items() if k not in GROUP and k != "instance")),
        ): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name.startswith("farm_nightly") and all(s.labels.get(k) == v for k, v in GROUP.items())
    }


def _run(real_run: RealRun, status: str) -> dict[str, Any]:
    return {**real_run.document, "kind": "nightly", "suite": GROUP["suite"], "status": status}


def test_a_successful_then_a_failed_nightly(pushgateway: str, real_run: RealRun) -> None:
    job = real_run.job
    push_run_summary(pushgateway, _run(real_run, "complete"), RunTally.of([job]), now=1_000_000.0)
    pushed = _pushed(pushgateway)
    assert pushed[("farm_nightly_reference_checks", (("state", "passed"),))] == 1
    assert pushed[("farm_nightly_reference_checks", (("state", "failed"),))] == 0
    # per-(model, device, target) results are farm serve's: none pushed (the series budget)
    assert not [key for key in pushed if {"model", "device", "target"} & {k for k, _ in key[1]}]
    assert pushed[("farm_nightly_last_success_timestamp_seconds", ())] == 1_000_000.0
    assert pushed[("farm_nightly_jobs", (("status", "ok"),))] == 1
    assert pushed[("farm_nightly_duration_seconds", ())] == pytest.approx(
        job["finished_at"] - job["queued_at"]
    )

    failed = {
        **{k: job[k] for k in ("job_id", "model", "device", "unit", "target", "queued_at")},
        "status": "failed",
        "error": "unit lost",
        "error_type": "DeviceLostError",
    }
    push_run_summary(pushgateway, _run(real_run, "complete"), RunTally.of([failed]), now=1_086_400.0)
    pushed = _pushed(pushgateway)
    assert pushed[("farm_nightly_last_run_timestamp_seconds", ())] == 1_086_400.0
    # the convention: a failed run leaves the last success where it was, for the staleness alert
    assert pushed[("farm_nightly_last_success_timestamp_seconds", ())] == 1_000_000.0
    assert pushed[("farm_nightly_jobs", (("status", "failed"),))] == 1
    assert pushed[("farm_nightly_jobs", (("status", "ok"),))] == 0


def test_an_unreachable_pushgateway_is_one_farm_error() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(FarmError) as raised:
        push_run_summary(f"http://127.0.0.1:{port}", {"status": "complete"}, RunTally(), timeout_s=5)
    assert f"127.0.0.1:{port}" in raised.value.message and "--pushgateway" in raised.value.hint


def test_a_simulated_job_counts_in_no_reference_state() -> None:
    from ondevice_farm.metrics.pushgateway import summary_registry

    def job(device: str, latency: str) -> dict[str, object]:
        return {
            "status": "ok", "model": {"name": "m"}, "device": device, "target": "ort/cpu",
            "started_at": 1.0, "finished_at": 2.0, "latency_ms": {"p50": 2.0, "p90": 3.0, "p99": 4.0},
            "reference": {"status": "failed", "passed": False, "outputs": {"y": {"passed": False}},
                          "missing_outputs": []},
            "provenance": {"latency": latency},
        }  # fmt: skip

    registry = summary_registry(
        {"run_id": "r", "suite": "s"},
        RunTally.of([job("simulated", "synthetic"), job("host-cpu", "measured")]),
        3.0,
    )
    assert registry.get_sample_value("farm_nightly_jobs", {"status": "ok"}) == 2
    assert registry.get_sample_value("farm_nightly_reference_checks", {"state": "failed"}) == 1
    assert registry.get_sample_value("farm_nightly_reference_checks", {"state": "not_compared"}) == 0
