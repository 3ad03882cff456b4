"""What a stored job's row holds besides its summary document: the columns queries read instead of
parsing JSON (docs/results.md, "The results store").

A job document is parsed once, in Python, when it is written (`job_row`); every column below is a
copy of the value at its JSON path, where that value is of the column's kind (a number for `real`,
a string for `text`, true/false for `bool`); anything else (absent, null, another kind) is NULL.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ondevice_farm.job_parts import part_name, split_job, value_at

#: the job duration histogram the store keeps up to date on every write, in seconds (the
#: exporter's DEFAULT_DURATION_BUCKETS_S); a change is a migration that rebuilds job_duration_counts
STORED_DURATION_BOUNDS_S: tuple[float, ...] = (
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
)  # fmt: skip
MICROS_PER_S = 1_000_000


@dataclass(frozen=True)
class Column:
    """A column of `jobs` that holds the value at `path` of the job's document."""

    path: str
    name: str
    #: real | text | bool
    kind: str

    def value(self, document: dict[str, Any]) -> Any:
        """What this column stores for `document`."""
        raw = value_at(document, self.path)
        if self.kind == "real":
            number = isinstance(raw, int | float) and not isinstance(raw, bool)
            return float(raw) if number and math.isfinite(raw) else None
        if self.kind == "bool":
            return int(raw) if isinstance(raw, bool) else None
        return raw if isinstance(raw, str) else None

    def read(self, stored: Any) -> Any:
        """The column's stored value as the document holds it."""
        if stored is None:
            return None
        if self.kind == "bool":
            return bool(stored)
        return float(stored) if self.kind == "real" else str(stored)


#: summary columns (schema 4): what the exporter, `farm gc` and a series' history read
SUMMARY_COLUMNS: tuple[Column, ...] = (
    Column("$.requested", "requested", "text"),
    Column("$.artifact_sha256", "artifact_sha256", "text"),
    Column("$.paired_baseline.artifact_sha256", "paired_baseline_sha256", "text"),
    Column("$.latency_ms.p50", "latency_p50_ms", "real"),
    Column("$.latency_ms.p90", "latency_p90_ms", "real"),
    Column("$.latency_ms.p99", "latency_p99_ms", "real"),
    Column("$.first_inference_ms", "first_inference_ms", "real"),
    Column("$.load_ms", "load_ms", "real"),
    Column("$.warm_load_ms", "warm_load_ms", "real"),
    Column("$.peak_memory_mb", "peak_memory_mb", "real"),
    Column("$.reference.status", "reference_status", "text"),
    Column("$.reference.passed", "reference_passed", "bool"),
    Column("$.provenance.latency", "provenance_latency", "text"),
    Column("$.provenance.placement", "provenance_placement", "text"),
    Column("$.energy.mj_per_inference", "energy_mj_per_inference", "real"),
    Column("$.energy.uncertainty_mj", "energy_uncertainty_mj", "real"),
    Column("$.energy.source", "energy_source", "text"),
    Column("$.sustained.summary.slowdown", "sustained_slowdown", "real"),
    Column("$.sustained.summary.time_to_first_throttle_s", "sustained_throttle_s", "real"),
    Column("$.sustained.summary.energy_mj_per_inference", "sustained_energy_mj_per_inference", "real"),
    Column("$.generation.ttft_ms.median", "generation_ttft_ms", "real"),
    Column("$.generation.decode_tokens_per_s.median", "generation_decode_tokens_per_s", "real"),
)
#: columns every schema had, copied from the document as add_job always did
IDENTITY_COLUMNS: tuple[Column, ...] = (
    Column("$.model.name", "model_name", "text"),
    Column("$.model.sha256", "model_sha256", "text"),
    Column("$.device", "device", "text"),
    Column("$.unit", "unit", "text"),
    Column("$.target", "target", "text"),
    Column("$.status", "status", "text"),
    Column("$.error", "error", "text"),
    Column("$.started_at", "started_at", "real"),
    Column("$.finished_at", "finished_at", "real"),
)
#: JSON path -> the column that answers it (ResultsStore.job_fields, job_summaries)
COLUMN_FOR_PATH: dict[str, Column] = {c.path: c for c in (*IDENTITY_COLUMNS, *SUMMARY_COLUMNS)}
#: every column of a job row, in the order `job_row` gives them
JOB_COLUMNS: tuple[str, ...] = (
    "job_id",
    "run_id",
    *(c.name for c in IDENTITY_COLUMNS),
    *(c.name for c in SUMMARY_COLUMNS),
    "document_bytes",
    "document",
)


@dataclass(frozen=True)
class StoredJob:
    """What the store's incremental state (store_state.py) knows of one job."""

    job_id: str
    series: tuple[str, str, str]
    device: str
    status: str
    started_at: float | None
    finished_at: float


@dataclass(frozen=True)
class JobRow:
    """One job as the store writes it: its row of `jobs` and its rows of `job_parts`."""

    values: tuple[Any, ...]
    #: BULKY_JOB_KEYS entry -> the JSON of its parts ({where: value}, as split_job gives them)
    parts: dict[str, str]
    job: StoredJob


def job_row(run_id: str, document: dict[str, Any]) -> JobRow:
    """The rows of a complete job document (its `finished_at` is set: the store's key order)."""
    summary, parts = split_job(document)
    summary_text = json.dumps(summary)
    grouped: dict[str, dict[str, Any]] = {}
    for where, value in parts.items():
        grouped.setdefault(part_name(where), {})[where] = value
    parts_text = {name: json.dumps(group) for name, group in grouped.items()}
    identity = [
        document["model"]["name"],
        document["model"]["sha256"],
        document["device"],
        document.get("unit"),
        document["target"],
        document["status"],
        document.get("error"),
        document.get("started_at"),
        float(document["finished_at"]),
    ]
    size = len(summary_text) + sum(len(text) for text in parts_text.values())
    values = (
        document["job_id"],
        run_id,
        *identity,
        *(c.value(document) for c in SUMMARY_COLUMNS),
        size,
        summary_text,
    )
    started = document.get("started_at")
    job = StoredJob(
        job_id=str(document["job_id"]),
        series=(str(document["model"]["name"]), str(document["device"]), str(document["target"])),
        device=str(document["device"]),
        status=str(document["status"]),
        started_at=None if started is None else float(started),
        finished_at=float(document["finished_at"]),
    )
    return JobRow(values, parts_text, job)


def duration_bucket(started_at: float | None, finished_at: float) -> int | None:
    """Index of the first stored bound the job's duration is within (len: beyond the last);
    None for a job that never started on a unit."""
    if started_at is None:
        return None
    duration = finished_at - started_at
    for index, bound in enumerate(STORED_DURATION_BOUNDS_S):
        if duration <= bound:
            return index
    return len(STORED_DURATION_BOUNDS_S)


def duration_micros(started_at: float | None, finished_at: float) -> int:
    """A job's time on its unit in whole microseconds: sums of these add and subtract exactly."""
    return 0 if started_at is None else round((finished_at - started_at) * MICROS_PER_S)
