"""The exporter over a results store holding real host-cpu results, read with get_sample_value."""

from __future__ import annotations

import copy
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ondevice_farm.metrics.collector import FarmCollector, farm_registry
from ondevice_farm.metrics.fleet_state import FleetSnapshot, UnitState
from ondevice_farm.store import ResultsStore, new_run_id

from .conftest import SUITE, HostFleet, RealRun, file_as_nightly

SERIES = {"model": "tinynet", "device": "host-cpu", "target": "ort/cpu"}


@pytest.fixture
def store_path(tmp_path: Path, real_run: RealRun) -> Iterator[Path]:
    """A store of its own per test, holding the real run's job."""
    path = tmp_path / "results.sqlite"
    with ResultsStore(path) as store:
        store.start_run(real_run.document["run_id"], "submit", {})
        store.add_job(real_run.document["run_id"], real_run.job)
        store.finish_run(real_run.document["run_id"], "complete")
    yield path


def _variant(job: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The measured job filed again under another id, with some fields changed."""
    copied = copy.deepcopy(job)
    copied.update(changes)
    copied["job_id"] = new_run_id() + "-" + str(time.monotonic_ns())[-6:]
    return copied


class StaticFleet:
    def __init__(self, snapshot: FleetSnapshot) -> None:
        self.value = snapshot

    def snapshot(self) -> FleetSnapshot:
        return self.value


def test_latest_result_in_base_units(store_path: Path, real_run: RealRun) -> None:
    job = real_run.job
    registry = farm_registry(FarmCollector(store_path))
    value = registry.get_sample_value
    for quantile, key in (("0.5", "p50"), ("0.99", "p99")):
        seconds = value("farm_inference_latency_seconds", {**SERIES, "quantile": quantile})
        assert seconds == pytest.approx(job["latency_ms"][key] / 1000)
    # p90 and the rest of the percentiles are the reports' (docs/metrics.md, "Series budget")
    assert value("farm_inference_latency_seconds", {**SERIES, "quantile": "0.9"}) is None
    assert value("farm_first_inference_seconds", SERIES) == pytest.approx(job["first_inference_ms"] / 1000)
    assert value("farm_session_load_seconds", SERIES) == pytest.approx(job["load_ms"] / 1000)
    if job["peak_memory_mb"] is not None:
        assert value("farm_peak_memory_bytes", SERIES) == pytest.approx(job["peak_memory_mb"] * 1024 * 1024)
    for backend, count in job["placement"].items():
        assert value("farm_ops", {**SERIES, "backend": backend, "source": "measured"}) == count
    assert value("farm_cpu_fallback_ops", {**SERIES, "source": "measured"}) == 0  # what ort/cpu asked for
    output = job["reference"]["outputs"]["probabilities"]
    assert value("farm_reference_max_abs_error", SERIES) == pytest.approx(output["max_abs"])
    assert value("farm_reference_snr_db", SERIES) == pytest.approx(output["snr_db"])
    assert value("farm_reference_state", {**SERIES, "state": "passed"}) == 1
    # per unit: its hottest sensor after its newest job, the unit named (not one series per sensor)
    after = (job.get("thermal") or {}).get("after") or {}
    hottest = max((after.get("temperatures_c") or {}).values(), default=None)
    unit = {"device": "host-cpu", "unit": job["unit"]}
    assert value("farm_device_temperature_celsius", {**unit, "sensor": "max"}) == (
        None if hottest is None else pytest.approx(hottest)
    )
    assert value("farm_store_up") == 1


def test_sustained_run_and_energy_as_one_figure_each(store_path: Path, real_run: RealRun) -> None:
    """A sustained run is exported as its steady-state over first-span p50, never per window; the
    energy figure is the timed runs' (the sustained run's stays in the report)."""
    job = real_run.job
    assert len(job["sustained"]["windows"]) >= 3
    text = generate_latest(farm_registry(FarmCollector(store_path))).decode()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    assert not [s for s in samples if "window" in s.labels or s.name.startswith("farm_sustained_latency")]
    value = farm_registry(FarmCollector(store_path)).get_sample_value
    assert value("farm_sustained_slowdown_ratio", SERIES) == pytest.approx(
        job["sustained"]["summary"]["slowdown"]
    )
    energy = value("farm_energy_per_inference_joules", {**SERIES, "source": "estimated"})
    assert energy == pytest.approx(job["energy"]["mj_per_inference"] / 1000)
    assert value("farm_sustained_energy_per_inference_joules", SERIES) is None


def test_newest_job_of_a_series_wins_and_failures_only_count(store_path: Path, real_run: RealRun) -> None:
    job = real_run.job
    slower = _variant(
        job,
        started_at=job["started_at"] + 60,
        finished_at=job["finished_at"] + 60,
        latency_ms={**job["latency_ms"], "p50": job["latency_ms"]["p50"] * 2},
    )
    failed = {
        k: v
        for k, v in _variant(job, finished_at=job["finished_at"] + 120).items()
        if k in ("job_id", "model", "device", "unit", "target", "queued_at", "finished_at")
    }
    failed.update(status="failed", error="unit lost", error_type="DeviceLostError")
    with ResultsStore(store_path) as store:
        run_id = new_run_id()
        store.start_run(run_id, "submit", {})
        store.add_job(run_id, slower)
        store.add_job(run_id, failed)
    registry = farm_registry(FarmCollector(store_path))
    p50 = registry.get_sample_value("farm_inference_latency_seconds", {**SERIES, "quantile": "0.5"})
    assert p50 == pytest.approx(job["latency_ms"]["p50"] * 2 / 1000)  # the failed newer job is not a result
    assert registry.get_sample_value("farm_jobs_total", {"device": "host-cpu", "status": "ok"}) == 2
    assert registry.get_sample_value("farm_jobs_total", {"device": "host-cpu", "status": "failed"}) == 1
    # the failed job never started on a unit: counted above, not timed here
    assert registry.get_sample_value("farm_job_duration_seconds_count", {"device": "host-cpu"}) == 2
    assert registry.get_sample_value(
        "farm_job_duration_seconds_sum", {"device": "host-cpu"}
    ) == pytest.approx(2 * job["duration_s"])
    le = "0.1" if job["duration_s"] <= 0.1 else "1800.0"
    assert (
        registry.get_sample_value("farm_job_duration_seconds_bucket", {"device": "host-cpu", "le": le}) == 2
    )


def test_failing_reference_and_accelerator_fallbacks(store_path: Path, real_run: RealRun) -> None:
    """A result on an accelerator target whose profile shows CPU ops and a failed reference check."""
    job = real_run.job
    cpu_ops = job["ops"][:3]
    failing = _variant(
        job,
        target="ort/nnapi",
        fallback_ops=cpu_ops,
        reference={**job["reference"], "passed": False, "status": "failed"},
    )
    with ResultsStore(store_path) as store:
        store.add_job(job["run_id"], failing)
    registry = farm_registry(FarmCollector(store_path))
    nnapi = {**SERIES, "target": "ort/nnapi"}
    assert registry.get_sample_value("farm_cpu_fallback_ops", {**nnapi, "source": "measured"}) == 3
    assert registry.get_sample_value("farm_reference_state", {**nnapi, "state": "failed"}) == 1
    assert registry.get_sample_value("farm_reference_state", {**nnapi, "state": "passed"}) is None
    assert registry.get_sample_value("farm_reference_state", {**SERIES, "state": "passed"}) == 1


def test_nightly_timestamp_per_suite(store_path: Path, real_run: RealRun) -> None:
    registry = farm_registry(FarmCollector(store_path))
    assert registry.get_sample_value("farm_last_nightly_timestamp_seconds", {"suite": SUITE}) is None
    before = time.time()
    with ResultsStore(store_path) as store:
        file_as_nightly(store, real_run.job)
        running = new_run_id()
        store.start_run(running, "nightly", {}, suite="other")  # not finished: not a nightly yet
    stamp = registry.get_sample_value("farm_last_nightly_timestamp_seconds", {"suite": SUITE})
    assert stamp is not None and before <= stamp <= time.time()
    assert registry.get_sample_value("farm_last_nightly_timestamp_seconds", {"suite": "other"}) is None


def test_fleet_state_from_the_host_units(store_path: Path) -> None:
    fleet = HostFleet()
    try:
        fleet.queue_jobs = 4
        registry = farm_registry(FarmCollector(store_path, fleet))
        (unit,) = [u for u in fleet.snapshot().devices if u.device == "host-cpu"]
        labels = {"device": "host-cpu", "unit": unit.unit}
        assert registry.get_sample_value("farm_device_up", labels) == 1
        assert registry.get_sample_value("farm_device_busy", labels) == 0
        assert registry.get_sample_value("farm_queue_jobs") == 4
    finally:
        fleet.close()


def test_a_down_busy_unit_and_its_live_temperature(store_path: Path) -> None:
    fleet = StaticFleet(
        FleetSnapshot(
            devices=(
                UnitState("pixel8", "35011FDH2000AB", up=True, busy=True, temperature_c=41.5),
                UnitState("pixel8", "35011FDH2000CD", up=False),
            ),
            queue_jobs=2,
            running_jobs=1,
        )
    )
    registry = farm_registry(FarmCollector(store_path, fleet))
    ab = {"device": "pixel8", "unit": "35011FDH2000AB"}
    assert registry.get_sample_value("farm_device_busy", ab) == 1
    assert registry.get_sample_value("farm_device_temperature_celsius", {**ab, "sensor": "reported"}) == 41.5
    assert registry.get_sample_value("farm_device_up", {"device": "pixel8", "unit": "35011FDH2000CD"}) == 0
    assert registry.get_sample_value("farm_running_jobs") == 1


def test_without_a_fleet_no_fleet_gauges(store_path: Path) -> None:
    text = generate_latest(farm_registry(FarmCollector(store_path))).decode()
    assert "farm_device_up" not in text and "farm_queue_jobs" not in text
    assert "farm_inference_latency_seconds{" in text


def test_conventions_help_units_and_bounded_labels(store_path: Path, real_run: RealRun) -> None:
    fleet = HostFleet()
    try:
        with ResultsStore(store_path) as store:
            file_as_nightly(store, real_run.job)
        text = generate_latest(farm_registry(FarmCollector(store_path, fleet))).decode()
    finally:
        fleet.close()
    families = list(text_string_to_metric_families(text))
    assert {f.name for f in families} >= {
        "farm_inference_latency_seconds",
        "farm_first_inference_seconds",
        "farm_session_load_seconds",
        "farm_peak_memory_bytes",
        "farm_ops",
        "farm_cpu_fallback_ops",
        "farm_reference_max_abs_error",
        "farm_reference_snr_db",
        "farm_reference_state",
        "farm_device_temperature_celsius",
        "farm_device_up",
        "farm_device_busy",
        "farm_jobs",
        "farm_job_duration_seconds",
        "farm_queue_jobs",
        "farm_last_nightly_timestamp_seconds",
    }
    allowed = {
        "model",
        "device",
        "target",
        "quantile",
        "backend",
        "source",
        "unit",
        "sensor",
        "status",
        "suite",
        "le",
        "state",
    }
    documented = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    for family in families:
        assert family.documentation, f"{family.name} has no HELP"
        assert f"`{family.name}" in documented, f"{family.name} is not in docs/metrics.md"
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples)
        for sample in family.samples:
            assert set(sample.labels) <= allowed, sample  # never run ids, job ids or sample indexes
            assert real_run.document["run_id"] not in str(sample.labels.values())


def test_unreadable_store_is_reported_not_raised(store_path: Path) -> None:
    """A store the exporter cannot read (here: the watermark every scrape reads first, gone) makes
    farm_store_up 0, and the scrape still answers, with the fleet, so Prometheus can alert on it."""
    fleet = StaticFleet(FleetSnapshot(devices=(UnitState("host-cpu", "vm", up=True),)))
    registry = farm_registry(FarmCollector(store_path, fleet))
    assert registry.get_sample_value("farm_store_up") == 1
    with sqlite3.connect(store_path) as db:
        db.execute("DROP TABLE jobs_watermark")
    assert registry.get_sample_value("farm_store_up") == 0
    assert registry.get_sample_value("farm_inference_latency_seconds", {**SERIES, "quantile": "0.5"}) is None
    assert registry.get_sample_value("farm_device_up", {"device": "host-cpu", "unit": "vm"}) == 1


def test_the_controllers_failing_writes_and_pending_ones_are_seen(store_path: Path) -> None:
    """A readable store whose writes from the controller fail (an outage being waited out) is
    not up; the jobs waiting to be written are counted."""
    writing = StaticFleet(FleetSnapshot(store_pending_writes=2))
    registry = farm_registry(FarmCollector(store_path, writing))
    assert registry.get_sample_value("farm_store_up") == 1
    assert registry.get_sample_value("farm_store_pending_writes") == 2
    failing = StaticFleet(FleetSnapshot(store_pending_writes=5, store_writes_failing=True))
    registry = farm_registry(FarmCollector(store_path, failing))
    assert registry.get_sample_value("farm_store_up") == 0
    assert registry.get_sample_value("farm_store_pending_writes") == 5


def test_a_scrape_never_sees_half_a_write(store_path: Path, real_run: RealRun) -> None:
    """Each job the writer adds is a new model: one more latency series and one more ok job,
    so in every consistent scrape the two agree, and every series has all of its metrics."""
    registry = farm_registry(FarmCollector(store_path))
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        with ResultsStore(store_path) as store:
            run_id = new_run_id()
            # a suite's models: every one is exported (ad-hoc ones only up to the budget's places)
            store.start_run(run_id, "nightly", {}, suite=SUITE)
            n = 0
            while not stop.is_set():
                n += 1
                model = {"name": f"m{n}", "sha256": "0" * 64}
                store.add_job(run_id, _variant(real_run.job, model=model, run_id=run_id))
            written.append(n)

    thread = threading.Thread(target=writer)
    thread.start()
    scrapes = 0
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
            p50 = {
                s.labels["model"]
                for s in families["farm_inference_latency_seconds"].samples
                if s.labels["quantile"] == "0.5"
            }
            ok = sum(
                s.value
                for s in families["farm_jobs"].samples
                if s.name == "farm_jobs_total" and s.labels["status"] == "ok"
            )
            assert len(p50) == ok
            for name in ("farm_session_load_seconds", "farm_reference_state", "farm_ops"):
                assert {s.labels["model"] for s in families[name].samples} == p50, name
            scrapes += 1
    finally:
        stop.set()
        thread.join(timeout=30)
    assert written and written[0] > 5 and scrapes > 5


def test_planned_placement_is_labelled_and_a_simulated_unit_exports_no_reference(
    store_path: Path, real_run: RealRun
) -> None:
    """Op counts say how they were obtained (`source`); a simulated unit's synthetic job, which has
    no outputs, exports no reference series, so no reference alert can fire on it."""
    job = real_run.job
    planned = _variant(
        job, device="iphone15", target="coreml/ane", placement={"ANE": 7, "CPU": 2},
        provenance={"latency": "measured", "op_times": "estimated", "placement": "planned",
                    "fallbacks": "planned", "formulas": {}},
    )  # fmt: skip
    synthetic = _variant(
        job, device="simulated", reference={**job["reference"], "outputs": {}, "passed": False},
        provenance={"latency": "synthetic", "op_times": None, "placement": "synthetic",
                    "fallbacks": "synthetic", "formulas": {}},
    )  # fmt: skip
    with ResultsStore(store_path) as store:
        store.add_job(job["run_id"], planned)
        store.add_job(job["run_id"], synthetic)
    registry = farm_registry(FarmCollector(store_path))
    iphone = {**SERIES, "device": "iphone15", "target": "coreml/ane"}
    assert registry.get_sample_value("farm_ops", {**iphone, "backend": "ANE", "source": "planned"}) == 7
    assert registry.get_sample_value("farm_ops", {**iphone, "backend": "ANE", "source": "measured"}) is None
    simulated = {**SERIES, "device": "simulated"}
    assert registry.get_sample_value("farm_session_load_seconds", simulated) is not None
    assert registry.get_sample_value("farm_reference_state", {**simulated, "state": "failed"}) is None
    # a measured job still has it
    assert registry.get_sample_value("farm_reference_state", {**SERIES, "state": "passed"}) == 1
