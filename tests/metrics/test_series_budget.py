"""The series budget (docs/metrics.md, "Series budget"), counted on what `farm serve`'s /metrics
answers over a store of simulated lab runs: nightlies of a suite and a stream of ad-hoc uploads,
on three phone profiles of two units each, every job with a 200-op profile, a ten-minute
sustained run, energy and a reference check (tests/metrics/lab_jobs.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ondevice_farm.config import FarmHome
from ondevice_farm.metrics.budget import (
    DEFAULT_ADHOC_SERIES,
    LAB_SERIES_BUDGET,
    SERIES_PER_RESULT_BUDGET,
    ExportLimits,
    lab_series,
)
from ondevice_farm.metrics.disk import DiskUsage
from ondevice_farm.metrics.fleet_state import FleetSnapshot, UnitState
from ondevice_farm.metrics.server import start_metrics_server
from ondevice_farm.store import ResultsStore

from .conftest import RealRun, http_get
from .lab_jobs import LAB_OPS, PROFILES, UNITS_PER_PROFILE, file_run, lab_job, run_id_at

SUITE = "lab"
SUITE_MODELS = ("mobilenet", "resnet50", "whisper-tiny", "llama-1b")
#: uploads, one model each on one target of every profile: more than the ad-hoc places below
ADHOC_UPLOADS = 12
ADHOC_SERIES = 5
NIGHTLIES = 2
T0 = 1_800_000_000.0
RESULT = ("model", "device", "target")
UNIT = ("device", "unit")


class Fleet:
    def snapshot(self) -> FleetSnapshot:
        units = tuple(
            UnitState(device, f"{device}-unit-{n}", up=True, busy=n == 0, temperature_c=35.0)
            for device, _, _ in PROFILES
            for n in range(UNITS_PER_PROFILE)
        )
        return FleetSnapshot(devices=units, queue_jobs=3, running_jobs=2)


@dataclass(frozen=True)
class Scrape:
    """Every series of one /metrics answer: (name, labels) pairs."""

    values: list[tuple[str, dict[str, str], float]]

    @property
    def series(self) -> list[tuple[str, dict[str, str]]]:
        return [(name, labels) for name, labels, _ in self.values]

    def per_result(self) -> dict[tuple[str, ...], int]:
        counts: dict[tuple[str, ...], int] = defaultdict(int)
        for _, labels in self.series:
            if set(RESULT) <= set(labels):
                counts[tuple(labels[k] for k in RESULT)] += 1
        return dict(counts)

    def per_unit(self) -> dict[tuple[str, ...], int]:
        counts: dict[tuple[str, ...], int] = defaultdict(int)
        for _, labels in self.series:
            if set(UNIT) <= set(labels):
                counts[tuple(labels[k] for k in UNIT)] += 1
        return dict(counts)

    def per_profile(self) -> int:
        """Series labelled by device alone (job counts and durations), over the profiles."""
        devices = {d for d, _, _ in PROFILES}
        alone = [ls for _, ls in self.series if "device" in ls and not {"model", "unit"} & set(ls)]
        assert {ls["device"] for ls in alone} <= devices
        return -(-len(alone) // len(devices))

    def fixed(self) -> int:
        return sum(1 for _, labels in self.series if "device" not in labels)


def _scrape(store_path: Path, home: Path, adhoc_series: int) -> Scrape:
    disk = DiskUsage(FarmHome(home), scan_interval_s=0)
    server = start_metrics_server(
        store_path, port=0, fleet=Fleet(), disk=disk, limits=ExportLimits(adhoc_series=adhoc_series)
    )
    try:
        status, body = http_get(server.url)
    finally:
        server.stop()
    assert status == 200
    families = text_string_to_metric_families(body.decode())
    return Scrape([(s.name, dict(s.labels), s.value) for f in families for s in f.samples])


@pytest.fixture(scope="module")
def lab_store(tmp_path_factory: pytest.TempPathFactory, real_run: RealRun) -> Iterator[Path]:
    """NIGHTLIES nightlies of the suite on every profile and target, units alternating between
    nights, then ADHOC_UPLOADS uploads of a model of its own each, newest last."""
    path = tmp_path_factory.mktemp("lab") / "results.sqlite"
    base = real_run.job
    with ResultsStore(path) as store:
        for night in range(NIGHTLIES):
            run_id = run_id_at(night)
            jobs = [
                lab_job(base, model=model, profile=p, unit=(night + m) % UNITS_PER_PROFILE, target=target,
                        finished_at=T0 + night * 86_400 + m, run_id=run_id, generation=model == "llama-1b")
                for m, model in enumerate(SUITE_MODELS)
                for p, (_, targets, _) in enumerate(PROFILES)
                for target in targets
            ]  # fmt: skip
            file_run(store, "nightly", jobs, suite=SUITE)
        for n in range(ADHOC_UPLOADS):
            run_id = run_id_at(100 + n)
            jobs = [
                lab_job(base, model=f"upload-{n}", profile=p, unit=0, target=targets[n % len(targets)],
                        finished_at=T0 + 3 * 86_400 + n * 60, run_id=run_id)
                for p, (_, targets, _) in enumerate(PROFILES)
            ]  # fmt: skip
            file_run(store, "submit", jobs)
        # an ad-hoc rerun of a suite model: still a suite model's series
        rerun = run_id_at(999)
        job = lab_job(base, model=SUITE_MODELS[0], profile=0, unit=1, target=PROFILES[0][1][0],
                      finished_at=T0 + 4 * 86_400, run_id=rerun)  # fmt: skip
        file_run(store, "submit", [job])
    yield path


def test_at_most_the_budget_per_combination_and_no_window_label(lab_store: Path, tmp_path: Path) -> None:
    scrape = _scrape(lab_store, tmp_path, ADHOC_SERIES)
    per_result = scrape.per_result()
    worst = max(per_result.values())
    assert worst <= SERIES_PER_RESULT_BUDGET, f"{worst} series for one (model, device, target)"
    labels = {name for _, ls in scrape.series for name in ls}
    assert not labels & {"window", "kernel", "op_type", "statistic", "share_of"}, labels
    # every suite combination is there, in full: the budget cut detail, not combinations
    suite = {c for c in per_result if c[0] in SUITE_MODELS}
    assert len(suite) == len(SUITE_MODELS) * sum(len(targets) for _, targets, _ in PROFILES)
    # three backends ran the 200 ops: the busiest, and the other two summed
    ops = {ls["backend"]: v for n, ls, v in scrape.values if n == "farm_ops" and ls["model"] == "mobilenet"
           and ls["device"] == "iphone15" and ls["target"] == "coreml/all"}  # fmt: skip
    assert set(ops) == {"ANE", "other"} and sum(ops.values()) == LAB_OPS


def test_adhoc_uploads_are_bounded_by_the_setting_newest_first(lab_store: Path, tmp_path: Path) -> None:
    per_result = _scrape(lab_store, tmp_path, ADHOC_SERIES).per_result()
    adhoc = {c for c in per_result if c[0] not in SUITE_MODELS}
    assert len(adhoc) == ADHOC_SERIES
    # the newest uploads' combinations (the last upload's three, then the one before it)
    newest = {f"upload-{ADHOC_UPLOADS - 1}", f"upload-{ADHOC_UPLOADS - 2}"}
    assert {c[0] for c in adhoc} == newest
    assert not {c for c in _scrape(lab_store, tmp_path, 0).per_result() if c[0] not in SUITE_MODELS}


def test_results_are_per_profile_and_per_unit_series_name_the_unit(
    lab_store: Path, real_run: RealRun, tmp_path: Path
) -> None:
    """The nightlies ran each combination on the profile's other unit each night: its series are
    the same ones (no unit in their labels); the per-unit series say which unit."""
    scrape = _scrape(lab_store, tmp_path, ADHOC_SERIES)
    for name, labels in scrape.series:
        assert not ("model" in labels and "unit" in labels), (name, labels)
    units = set(scrape.per_unit())
    assert units == {(d, f"{d}-unit-{n}") for d, _, _ in PROFILES for n in range(UNITS_PER_PROFILE)}
    # a unit's temperature: the hottest of its 13 sensors after its newest job, and the live one
    sensors = {ls["sensor"] for n, ls in scrape.series if n == "farm_device_temperature_celsius"}
    assert sensors == {"max", "reported"}
    before = {(n, tuple(sorted(ls.items()))) for n, ls in scrape.series if "model" in ls}
    with ResultsStore(lab_store) as store:
        # one more night of one suite model on pixel8's nnapi target, on the other unit again
        run_id = run_id_at(500)
        job = lab_job(real_run.job, model=SUITE_MODELS[1], profile=0, unit=1, target="ort/nnapi",
                      finished_at=T0 + 5 * 86_400, run_id=run_id)  # fmt: skip
        file_run(store, "nightly", [job], suite=SUITE)
    after = {(n, tuple(sorted(ls.items()))) for n, ls in _scrape(lab_store, tmp_path, ADHOC_SERIES).series
             if "model" in ls}  # fmt: skip
    assert after == before


def test_the_lab_fits_the_budget(lab_store: Path, tmp_path: Path) -> None:
    """Scaled to 40 profiles x 100 models x 3 targets and 1,000 units, with the default ad-hoc
    places: the worst combination's count for every combination, the worst unit's for every unit."""
    scrape = _scrape(lab_store, tmp_path, ADHOC_SERIES)
    per_result = max(scrape.per_result().values())
    per_unit = max(scrape.per_unit().values())
    total = lab_series(per_result, per_unit, scrape.per_profile(), scrape.fixed(), DEFAULT_ADHOC_SERIES)
    assert total <= LAB_SERIES_BUDGET, (
        f"{total} series: {per_result} per combination, {per_unit} per unit, "
        f"{scrape.per_profile()} per profile, {scrape.fixed()} fixed"
    )
