"""The exporter: a prometheus_client Collector that reads the results store at scrape time.

Every scrape reads the store inside one read transaction, so it shows the store at one
instant: a job being written is either entirely in the scrape or not at all. What is derived
from the latest jobs is kept by job id (a stored job never changes), so a scrape of a large farm
costs the store's watermark plus, when a job landed, a few queries for the new jobs only.

The exported series are budgeted (`ondevice_farm.metrics.budget`, docs/metrics.md "Series
budget"): at most SERIES_PER_RESULT_BUDGET per (model, device, target), suite models plus a
bounded set of recent ad-hoc ones. Names, units and labels follow Prometheus's conventions;
docs/metrics.md lists every metric.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from ondevice_farm.errors import StoreError, UsageError
from ondevice_farm.metrics.budget import (
    DEFAULT_EXPORT_LIMITS,
    NIGHTLY_KIND,
    ExportLimits,
    SeriesKey,
    exported_jobs,
)
from ondevice_farm.metrics.fleet_state import FleetSnapshot, FleetStateSource
from ondevice_farm.metrics.latest import JOB_PATHS, KEY_PATHS, LatestResult, parse_key, parse_latest
from ondevice_farm.store import ResultsStore, StoreLocation

#: farm_job_duration_seconds buckets: a host job takes a fraction of a second, a phone job minutes
DEFAULT_DURATION_BUCKETS_S: tuple[float, ...] = (
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
)  # fmt: skip
RESULT = ("model", "device", "target")
UNIT = ("device", "unit")
#: farm_device_temperature_celsius's sensor: the hottest after the unit's newest exported job
HOTTEST_SENSOR = "max"
#: ... and the controller's live reading
LIVE_SENSOR = "reported"

#: name -> (HELP, labels) of every gauge; docs/metrics.md says the same in more words. The
#: per-result gauges are, at most: 2 latency quantiles + first inference + load + warm load + peak
#: memory + DEFAULT_OP_BACKENDS farm_ops + fallbacks + 3 reference + energy + sustained slowdown +
#: generation TTFT = 15 = SERIES_PER_RESULT_BUDGET.
GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "farm_inference_latency_seconds": (
        "Warm inference latency of the newest successful job, by quantile of its timed runs (0.5, 0.99).",
        (*RESULT, "quantile"),
    ),
    "farm_first_inference_seconds": ("Latency of the first (cold) inference of the newest job.", RESULT),
    "farm_session_load_seconds": ("Time to load the model into an inference session on the unit.", RESULT),
    "farm_session_warm_load_seconds": ("Time to load it again right after the first, caches warm.", RESULT),
    "farm_peak_memory_bytes": ("Peak memory of the process that ran the newest job.", RESULT),
    "farm_ops": (
        "Ops of the newest job by the backend that ran them, the backends past the busiest summed as "
        "'other' (source: measured, planned or synthetic).",
        (*RESULT, "backend", "source"),
    ),
    "farm_cpu_fallback_ops": (
        "Ops run on the CPU although the target asked for an accelerator (source: as farm_ops).",
        (*RESULT, "source"),
    ),
    "farm_reference_max_abs_error": ("Largest absolute error against the host reference.", RESULT),
    "farm_reference_snr_db": ("Lowest signal-to-noise ratio against the host reference, dB.", RESULT),
    "farm_reference_state": (
        "1 for the state of the newest job's reference check: passed, failed or not_compared.",
        (*RESULT, "state"),
    ),
    "farm_energy_per_inference_joules": (
        "Energy per inference during the newest job's timed runs, idle draw subtracted (source: estimated).",
        (*RESULT, "source"),
    ),
    "farm_sustained_slowdown_ratio": (
        "Steady-state p50 over first-span p50 of the newest job's sustained run.", RESULT,
    ),
    "farm_generation_ttft_seconds": (
        "Time to first token of the newest generation job (median of its timed generations; measured).",
        RESULT,
    ),
    "farm_device_temperature_celsius": (
        "Temperature of a unit: its hottest sensor after its newest job (sensor 'max'), or live "
        "(sensor 'reported').",
        (*UNIT, "sensor"),
    ),
    "farm_last_nightly_timestamp_seconds": ("Unix time the newest nightly finished.", ("suite",)),
    "farm_store_up": (
        "1 if this scrape could read the results store and the controller's writes to it go through, else 0.",
        (),
    ),
    "farm_store_pending_writes": (
        "Finished jobs the controller is writing to the results store, or waiting to while it is down.",
        (),
    ),
    "farm_device_up": ("1 if the unit is attached and passed its last health check, else 0.", UNIT),
    "farm_device_busy": ("1 if the unit is running a job now, else 0.", UNIT),
    "farm_queue_jobs": ("Jobs submitted and waiting for a unit.", ()),
    "farm_running_jobs": ("Jobs running on a unit now.", ()),
}  # fmt: skip
FLEET_GAUGES = (
    "farm_device_up",
    "farm_device_busy",
    "farm_queue_jobs",
    "farm_running_jobs",
    "farm_store_pending_writes",
)
#: one series per (model, device, target) each: the bulk of a scrape, cached by job id when served
RESULT_GAUGES = tuple(name for name, (_, labels) in GAUGES.items() if labels[:3] == RESULT)
LIVE_GAUGES = tuple(name for name in GAUGES if name not in RESULT_GAUGES)
JOBS_HELP = "Jobs the farm has finished, by device and outcome (ok or failed)."
DURATION_HELP = "Time a unit spent on a job, from its start on the unit to its result."

DurationRow = tuple[str, str, int, int, float, list[int]]


@dataclass(frozen=True)
class StoreState:
    """What one scrape read from the store, at one instant."""

    readable: bool
    #: changes whenever a job is added or removed (None: unreadable)
    version: tuple[int, int] | None = None
    #: job id -> its result, in (model, device, target) order
    latest: dict[str, LatestResult] = field(default_factory=dict)
    durations: list[DurationRow] = field(default_factory=list)
    nightlies: dict[str, float] = field(default_factory=dict)


class FarmCollector(Collector):
    """Collects `farm_*` metrics from the store at `store_path` and, when given, the live fleet."""

    def __init__(
        self,
        store_path: StoreLocation,
        fleet: FleetStateSource | None = None,
        *,
        duration_buckets_s: tuple[float, ...] = DEFAULT_DURATION_BUCKETS_S,
        limits: ExportLimits = DEFAULT_EXPORT_LIMITS,
    ) -> None:
        self._store = ResultsStore(store_path)
        self._fleet = fleet
        self.duration_buckets_s = tuple(sorted(duration_buckets_s))
        self.limits = limits
        #: job id -> its combination, for every combination's newest job (small: five fields)
        self._keys: dict[str, SeriesKey] = {}
        #: run id -> its kind (a run's kind never changes), for the runs of those jobs
        self._run_kinds: dict[str, str] = {}
        #: job id -> its result, for the exported jobs only
        self._latest: dict[str, LatestResult] = {}
        self._version: tuple[int, int] | None = None
        self._durations: list[DurationRow] = []
        # Scrapes come on the HTTP server's threads; the store connection and cache are shared.
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._store.close()

    def describe(self) -> Iterable[Metric]:
        # Lets the registry check names without reading the store at registration.
        empty = StoreState(readable=True)
        return [*result_families([]), *self.live_families(empty, FleetSnapshot() if self._fleet else None)]

    def collect(self) -> Iterable[Metric]:
        state, fleet = self.read()
        yield from result_families(state.latest.values())
        yield from self.live_families(state, fleet)

    def read(self) -> tuple[StoreState, FleetSnapshot | None]:
        """The store (in one read transaction) and the fleet, as one scrape shows them."""
        fleet = self._fleet.snapshot() if self._fleet is not None else None
        with self._lock:
            try:
                with self._store.read_snapshot():
                    version = self._store.jobs_version()
                    # Jobs are only ever added (or removed): same version, same answers.
                    if version != self._version:
                        self._version = None
                        self._latest = self._latest_results()
                        self._durations = self._store.job_duration_buckets(self.duration_buckets_s)
                        self._version = version
                    nightlies = self._store.last_finished_runs(NIGHTLY_KIND)
            except StoreError:
                return StoreState(readable=False), fleet
            return StoreState(True, version, self._latest, self._durations, nightlies), fleet

    def _latest_results(self) -> dict[str, LatestResult]:
        """The exported combinations' newest jobs: what decides is read for every newest job (and
        kept), the numbers only for those exported."""
        ids = self._store.latest_job_ids()
        missing = [job_id for job_id in ids if job_id not in self._keys]
        fresh = self._store.job_fields(missing, KEY_PATHS) if missing else {}
        keys = {}
        for job_id in ids:
            key = self._keys.get(job_id)
            if key is None and job_id in fresh:
                key = parse_key(fresh[job_id])
            if key is not None:
                keys[job_id] = key
        self._keys = keys
        self._run_kinds = {run_id: self._run_kind(run_id) for run_id in {k.run_id for k in keys.values()}}
        exported = exported_jobs(keys, self._run_kinds, self.limits.adhoc_series)
        missing = [job_id for job_id in exported if job_id not in self._latest]
        fresh = self._store.job_fields(missing, JOB_PATHS) if missing else {}
        latest = {}
        for job_id in exported:
            result = self._latest.get(job_id)
            if result is None and job_id in fresh:
                result = parse_latest(fresh[job_id], self.limits.op_backends)
            if result is not None:
                latest[job_id] = result
        return dict(sorted(latest.items(), key=lambda item: item[1].labels))

    def _run_kind(self, run_id: str) -> str:
        kind = self._run_kinds.get(run_id)
        if kind is None:
            try:
                kind = self._store.run(run_id).kind
            except UsageError:  # a document naming no stored run: not a suite's
                kind = ""
        return kind

    def live_families(self, state: StoreState, fleet: FleetSnapshot | None) -> list[Metric]:
        """Everything but the per-series results: small, and changing between any two scrapes."""
        families = {
            name: _gauge(name) for name in LIVE_GAUGES if fleet is not None or name not in FLEET_GAUGES
        }
        writes_fail = fleet is not None and fleet.store_writes_failing
        families["farm_store_up"].add_metric([], 1.0 if state.readable and not writes_fail else 0.0)
        for suite, finished_at in sorted(state.nightlies.items()):
            families["farm_last_nightly_timestamp_seconds"].add_metric([suite], finished_at)
        _add_temperatures(families["farm_device_temperature_celsius"], state.latest.values(), fleet)
        if fleet is not None:
            _add_fleet(families, fleet)
        return [*families.values(), *self._job_families(state.durations)]

    def _job_families(self, rows: list[DurationRow]) -> list[Metric]:
        totals = CounterMetricFamily("farm_jobs", JOBS_HELP, labels=["device", "status"])
        histogram = HistogramMetricFamily("farm_job_duration_seconds", DURATION_HELP, labels=["device"])
        bounds = self.duration_buckets_s
        per_device: dict[str, tuple[list[int], int, float]] = {}
        for device, status, count, started, seconds, cumulative in sorted(rows):
            totals.add_metric([device, status], float(count))
            # Failed jobs that never started on a unit have no duration: counted, not timed.
            buckets, timed, total = per_device.get(device, ([0] * len(bounds), 0, 0.0))
            buckets = [a + b for a, b in zip(buckets, cumulative, strict=True)]
            per_device[device] = (buckets, timed + started, total + seconds)
        for device, (buckets, timed, total) in per_device.items():
            pairs = [(repr(bound), float(n)) for bound, n in zip(bounds, buckets, strict=True)]
            histogram.add_metric([device], [*pairs, ("+Inf", float(timed))], total)
        return [totals, histogram]


def _gauge(name: str) -> GaugeMetricFamily:
    doc, labels = GAUGES[name]
    return GaugeMetricFamily(name, doc, labels=list(labels))


def result_families(latest: Iterable[LatestResult]) -> list[GaugeMetricFamily]:
    """The per-series gauges (RESULT_GAUGES, in that order) of the given results."""
    families = {name: _gauge(name) for name in RESULT_GAUGES}

    def add(name: str, result: LatestResult, value: float | None, *extra: str) -> None:
        if value is not None:
            families[name].add_metric([*result.labels, *extra], value)

    for result in latest:
        for quantile, seconds in result.latency_s.items():
            add("farm_inference_latency_seconds", result, seconds, quantile)
        add("farm_first_inference_seconds", result, result.first_inference_s)
        add("farm_session_load_seconds", result, result.session_load_s)
        add("farm_session_warm_load_seconds", result, result.warm_load_s)
        add("farm_peak_memory_bytes", result, result.peak_memory_bytes)
        for backend, count in sorted(result.ops_by_backend.items()):
            add("farm_ops", result, float(count), backend, result.placement_source)
        add("farm_cpu_fallback_ops", result, float(result.cpu_fallback_ops), result.placement_source)
        # a simulated unit's outputs are synthetic (made to pass the reference check): exporting
        # them would put made-up numerics beside real ones, so no reference series and no alert
        if result.reference is not None and result.latency_source != "synthetic":
            add("farm_reference_max_abs_error", result, result.reference.max_abs_error)
            add("farm_reference_snr_db", result, result.reference.snr_db)
            add("farm_reference_state", result, 1.0, result.reference.state)
        add("farm_energy_per_inference_joules", result, result.energy_j, result.energy_source)
        add("farm_sustained_slowdown_ratio", result, result.sustained_slowdown)
        add("farm_generation_ttft_seconds", result, result.generation_ttft_s)
    return list(families.values())


def _add_temperatures(
    family: GaugeMetricFamily, latest: Iterable[LatestResult], fleet: FleetSnapshot | None
) -> None:
    newest_on_unit: dict[tuple[str, str], LatestResult] = {}
    for result in latest:
        key = (result.device, result.unit)
        seen = newest_on_unit.get(key)
        if result.max_temperature_c is not None and (seen is None or seen.finished_at < result.finished_at):
            newest_on_unit[key] = result
    for (device, unit), result in sorted(newest_on_unit.items()):
        if result.max_temperature_c is not None:
            family.add_metric([device, unit, HOTTEST_SENSOR], result.max_temperature_c)
    for state in sorted(fleet.devices if fleet else (), key=lambda u: (u.device, u.unit)):
        if state.temperature_c is not None:
            family.add_metric([state.device, state.unit, LIVE_SENSOR], state.temperature_c)


def _add_fleet(families: dict[str, GaugeMetricFamily], fleet: FleetSnapshot) -> None:
    for unit in sorted(fleet.devices, key=lambda u: (u.device, u.unit)):
        labels = [unit.device, unit.unit]
        families["farm_device_up"].add_metric(labels, 1.0 if unit.up else 0.0)
        families["farm_device_busy"].add_metric(labels, 1.0 if unit.busy else 0.0)
    families["farm_queue_jobs"].add_metric([], float(fleet.queue_jobs))
    families["farm_running_jobs"].add_metric([], float(fleet.running_jobs))
    families["farm_store_pending_writes"].add_metric([], float(fleet.store_pending_writes))


def farm_registry(collector: FarmCollector) -> CollectorRegistry:
    """A registry of its own (never the process-global one) holding only the farm's metrics."""
    registry = CollectorRegistry()
    registry.register(collector)
    return registry
