"""The exporter's series budget, and which stored series it exports (docs/metrics.md, "Series budget").

A lab of 40 device profiles x 100 suite models x 3 targets has 12,000 (model, device, target)
combinations; at 15 series each that is 180,000 series, which leaves room under 200,000 for the
per-unit and fleet-level series and a bounded set of ad-hoc results. Every series the exporter
writes is a Prometheus time series for as long as the result stays, so what grows with the lab
(per-op rows, sustained windows, every model anyone ever uploaded) stays in the store and the
reports, not here.

Which combinations are exported: every combination of a *suite model* (a model whose newest
result on some device and target came from a nightly run), plus the `adhoc_series` most recent
other combinations (ad-hoc `farm submit`s). A stored job's model name is whatever file name its
upload had, and `farm gc` keeps each combination's newest job, so without that bound every upload
would add series for good.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: series per (model, device profile, target), over every metric family carrying those labels
SERIES_PER_RESULT_BUDGET = 15
#: series of a whole lab: 40 profiles x 100 models x 3 targets, its units and fleet-level series
LAB_SERIES_BUDGET = 200_000
#: the lab the budget is sized for
LAB_PROFILES, LAB_MODELS, LAB_TARGETS, LAB_UNITS = 40, 100, 3, 1_000
#: ad-hoc (not suite) combinations exported: the most recent ones
DEFAULT_ADHOC_SERIES = 100
#: backends per combination in farm_ops: the one with the most ops and `other` beyond that
DEFAULT_OP_BACKENDS = 2
#: farm_ops's backend label for the ops of the backends past the first DEFAULT_OP_BACKENDS - 1
OTHER_BACKENDS = "other"
NIGHTLY_KIND = "nightly"


@dataclass(frozen=True)
class ExportLimits:
    """How much of the store the exporter turns into series."""

    #: the most recent ad-hoc combinations exported (0: suite models only)
    adhoc_series: int = DEFAULT_ADHOC_SERIES
    #: farm_ops series per combination (at least 1)
    op_backends: int = DEFAULT_OP_BACKENDS


DEFAULT_EXPORT_LIMITS = ExportLimits()


@dataclass(frozen=True)
class SeriesKey:
    """What the exporter needs of a combination's newest job to decide whether to export it."""

    model: str
    device: str
    target: str
    finished_at: float
    #: the run the job belongs to: its kind says suite or ad hoc
    run_id: str


def exported_jobs(keys: Mapping[str, SeriesKey], run_kinds: Mapping[str, str], adhoc_series: int) -> set[str]:
    """The job ids (of `keys`: job id -> its combination's newest job) whose series are exported.

    A model counts as a suite model on every device and target once one of its combinations'
    newest job came from a nightly: an ad-hoc rerun of a suite model on one unit does not make that
    combination compete with uploads for the ad-hoc places."""
    suite_models = {key.model for key in keys.values() if run_kinds.get(key.run_id) == NIGHTLY_KIND}
    suite = {job_id for job_id, key in keys.items() if key.model in suite_models}
    adhoc = sorted(
        (job_id for job_id in keys if job_id not in suite),
        key=lambda job_id: (keys[job_id].finished_at, job_id),
        reverse=True,
    )
    return suite | set(adhoc[: max(adhoc_series, 0)])


def bounded_backends(counts: Mapping[str, int], limit: int) -> dict[str, int]:
    """Ops by backend in at most `limit` entries: as they are when they fit, else the backends with
    the most ops (ties by name) and the rest summed under OTHER_BACKENDS."""
    if len(counts) <= limit:
        return dict(counts)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    kept = dict(ranked[: max(limit - 1, 0)])
    kept[OTHER_BACKENDS] = sum(count for _, count in ranked[max(limit - 1, 0) :])
    return kept


def lab_series(per_result: int, per_unit: int, per_profile: int, fixed: int, adhoc_series: int) -> int:
    """Series of the lab the budget is sized for, from the counts one store and fleet showed."""
    results = per_result * (LAB_PROFILES * LAB_MODELS * LAB_TARGETS + adhoc_series)
    return results + per_unit * LAB_UNITS + per_profile * LAB_PROFILES + fixed
