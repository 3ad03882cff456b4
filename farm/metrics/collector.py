"""The exporter: a prometheus_client Collector that reads the results store at scrape time.

Every scrape reads the store inside one read transaction, so it shows the store at one
instant: a job being written is either entirely in the scrape or not at all. Documents of
the latest jobs are parsed once and kept by job id (a stored job never changes), so a scrape
of a large farm costs one index walk plus a few aggregate queries.

Names, units and labels follow Prometheus's conventions; docs/metrics.md lists every metric.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from farm.errors import StoreError
from farm.metrics.fleet_state import FleetSnapshot, FleetStateSource
from farm.metrics.latest import JOB_PATHS, LatestResult, parse_latest
from farm.store import ResultsStore

#: farm_job_duration_seconds buckets: a host job takes a fraction of a second, a phone job minutes
DEFAULT_DURATION_BUCKETS_S: tuple[float, ...] = (
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
)  # fmt: skip
NIGHTLY_KIND = "nightly"
RESULT = ("model", "device", "target")
UNIT = ("device", "unit")

#: name -> (HELP, labels) of every gauge; docs/metrics.md says the same in more words
GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "farm_inference_latency_seconds": (
        "Warm inference latency of the newest successful job, by quantile of its timed runs.",
        (*RESULT, "quantile"),
    ),
    "farm_first_inference_seconds": ("Latency of the first (cold) inference of the newest job.", RESULT),
    "farm_session_load_seconds": ("Time to load the model into an inference session on the unit.", RESULT),
    "farm_peak_memory_bytes": ("Peak memory of the process that ran the newest job.", RESULT),
    "farm_ops": ("Ops of the newest job by the backend that ran them.", (*RESULT, "backend")),
    "farm_cpu_fallback_ops": ("Ops run on the CPU although the target asked for an accelerator.", RESULT),
    "farm_partitions": ("Subgraphs the model was split into between backends.", RESULT),
    "farm_reference_max_abs_error": ("Largest absolute error against the host reference.", RESULT),
    "farm_reference_snr_db": ("Lowest signal-to-noise ratio against the host reference, dB.", RESULT),
    "farm_reference_passed": ("1 if all outputs matched the host reference, else 0.", RESULT),
    "farm_result_timestamp_seconds": ("Unix time the newest successful job of the series finished.", RESULT),
    "farm_device_temperature_celsius": (
        "Temperature of a unit: after its newest job per sensor, or live (sensor 'reported').",
        (*UNIT, "sensor"),
    ),
    "farm_last_nightly_timestamp_seconds": ("Unix time the newest nightly finished.", ("suite",)),
    "farm_store_up": ("1 if this scrape could read the results store, else 0.", ()),
    "farm_device_up": ("1 if the unit is attached and passed its last health check, else 0.", UNIT),
    "farm_device_busy": ("1 if the unit is running a job now, else 0.", UNIT),
    "farm_queue_jobs": ("Jobs submitted and waiting for a unit.", ()),
    "farm_running_jobs": ("Jobs running on a unit now.", ()),
}  # fmt: skip
FLEET_GAUGES = ("farm_device_up", "farm_device_busy", "farm_queue_jobs", "farm_running_jobs")
JOBS_HELP = "Jobs the farm has finished, by device and outcome (ok or failed)."
DURATION_HELP = "Time a unit spent on a job, from its start on the unit to its result."

DurationRow = tuple[str, str, int, int, float, list[int]]


def _gauges() -> dict[str, GaugeMetricFamily]:
    return {name: GaugeMetricFamily(name, doc, labels=list(labels)) for name, (doc, labels) in GAUGES.items()}


class FarmCollector(Collector):
    """Collects `farm_*` metrics from the store at `store_path` and, when given, the live fleet."""

    def __init__(
        self,
        store_path: Path,
        fleet: FleetStateSource | None = None,
        *,
        duration_buckets_s: tuple[float, ...] = DEFAULT_DURATION_BUCKETS_S,
    ) -> None:
        self._store = ResultsStore(store_path)
        self._fleet = fleet
        self._buckets = tuple(sorted(duration_buckets_s))
        self._latest: dict[str, LatestResult] = {}
        # Scrapes come on the HTTP server's threads; the store connection and cache are shared.
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._store.close()

    def describe(self) -> Iterable[Metric]:
        # Lets the registry check names without reading the store at registration.
        families = _gauges()
        if self._fleet is None:
            for name in FLEET_GAUGES:
                del families[name]
        return [*families.values(), *self._job_families([])]

    def collect(self) -> Iterable[Metric]:
        fleet = self._fleet.snapshot() if self._fleet is not None else None
        families = _gauges()
        with self._lock:
            try:
                with self._store.read_snapshot():
                    latest = self._latest_results()
                    durations = self._store.job_duration_buckets(self._buckets)
                    nightlies = self._store.last_finished_runs(NIGHTLY_KIND)
            except StoreError:
                families["farm_store_up"].add_metric([], 0.0)
                latest, durations, nightlies = [], [], {}
            else:
                families["farm_store_up"].add_metric([], 1.0)
        self._add_results(families, latest)
        for suite, finished_at in sorted(nightlies.items()):
            families["farm_last_nightly_timestamp_seconds"].add_metric([suite], finished_at)
        if fleet is None:
            for name in FLEET_GAUGES:
                del families[name]
        else:
            self._add_fleet(families, fleet)
        yield from families.values()
        yield from self._job_families(durations)

    def _latest_results(self) -> list[LatestResult]:
        ids = self._store.latest_job_ids()
        missing = [job_id for job_id in ids if job_id not in self._latest]
        fresh = self._store.job_fields(missing, JOB_PATHS) if missing else {}
        cached = self._latest
        self._latest = {}
        for job_id in ids:
            result = cached.get(job_id)
            if result is None and job_id in fresh:
                result = parse_latest(fresh[job_id])
            if result is not None:
                self._latest[job_id] = result
        return sorted(self._latest.values(), key=lambda r: r.labels)

    @staticmethod
    def _add_results(families: dict[str, GaugeMetricFamily], latest: list[LatestResult]) -> None:
        def add(name: str, result: LatestResult, value: float | None, *extra: str) -> None:
            if value is not None:
                families[name].add_metric([*result.labels, *extra], value)

        newest_on_unit: dict[tuple[str, str], LatestResult] = {}
        for result in latest:
            for quantile, seconds in result.latency_s.items():
                add("farm_inference_latency_seconds", result, seconds, quantile)
            add("farm_first_inference_seconds", result, result.first_inference_s)
            add("farm_session_load_seconds", result, result.session_load_s)
            add("farm_peak_memory_bytes", result, result.peak_memory_bytes)
            for backend, count in sorted(result.ops_by_backend.items()):
                add("farm_ops", result, float(count), backend)
            add("farm_cpu_fallback_ops", result, float(result.cpu_fallback_ops))
            add("farm_partitions", result, None if result.partitions is None else float(result.partitions))
            if result.reference is not None:
                add("farm_reference_max_abs_error", result, result.reference.max_abs_error)
                add("farm_reference_snr_db", result, result.reference.snr_db)
                add("farm_reference_passed", result, 1.0 if result.reference.passed else 0.0)
            add("farm_result_timestamp_seconds", result, result.finished_at)
            key = (result.device, result.unit)
            seen = newest_on_unit.get(key)
            if result.temperatures_c and (seen is None or seen.finished_at < result.finished_at):
                newest_on_unit[key] = result
        for (device, unit), result in sorted(newest_on_unit.items()):
            for sensor, celsius in sorted(result.temperatures_c.items()):
                families["farm_device_temperature_celsius"].add_metric([device, unit, sensor], celsius)

    @staticmethod
    def _add_fleet(families: dict[str, GaugeMetricFamily], fleet: FleetSnapshot) -> None:
        for unit in sorted(fleet.devices, key=lambda u: (u.device, u.unit)):
            labels = [unit.device, unit.unit]
            families["farm_device_up"].add_metric(labels, 1.0 if unit.up else 0.0)
            families["farm_device_busy"].add_metric(labels, 1.0 if unit.busy else 0.0)
            if unit.temperature_c is not None:
                families["farm_device_temperature_celsius"].add_metric(
                    [*labels, "reported"], unit.temperature_c
                )
        families["farm_queue_jobs"].add_metric([], float(fleet.queue_jobs))
        families["farm_running_jobs"].add_metric([], float(fleet.running_jobs))

    def _job_families(self, rows: list[DurationRow]) -> list[Metric]:
        totals = CounterMetricFamily("farm_jobs", JOBS_HELP, labels=["device", "status"])
        histogram = HistogramMetricFamily("farm_job_duration_seconds", DURATION_HELP, labels=["device"])
        per_device: dict[str, tuple[list[int], int, float]] = {}
        for device, status, count, started, seconds, cumulative in sorted(rows):
            totals.add_metric([device, status], float(count))
            # Failed jobs that never started on a unit have no duration: counted, not timed.
            buckets, timed, total = per_device.get(device, ([0] * len(self._buckets), 0, 0.0))
            buckets = [a + b for a, b in zip(buckets, cumulative, strict=True)]
            per_device[device] = (buckets, timed + started, total + seconds)
        for device, (buckets, timed, total) in per_device.items():
            bounds = [(repr(bound), float(n)) for bound, n in zip(self._buckets, buckets, strict=True)]
            histogram.add_metric([device], [*bounds, ("+Inf", float(timed))], total)
        return [totals, histogram]


def farm_registry(collector: FarmCollector) -> CollectorRegistry:
    """A registry of its own (never the process-global one) holding only the farm's metrics."""
    registry = CollectorRegistry()
    registry.register(collector)
    return registry
