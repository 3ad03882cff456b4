"""Rows as a pandas DataFrame, and the column names the API's frames use (the run document's
names, units in the names). pandas is optional: a missing one is a `UsageError` naming the extra."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ondevice_farm.errors import UsageError

JOB_COLUMNS = (
    "job_id",
    "device",
    "unit",
    "target",
    "status",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "mean_ms",
    "load_ms",
    "first_inference_ms",
    "peak_memory_mb",
    "precision",
    "fallback_ops",
    "reference_passed",
    "error",
)
OP_COLUMNS = ("job_id", "device", "target", "op", "op_type", "backend", "mean_us", "share")
SAMPLE_COLUMNS = ("job_id", "device", "target", "index", "latency_ms")


def data_frame(rows: Iterable[Sequence[Any]], columns: Sequence[str]) -> Any:
    try:
        import pandas
    except ImportError:
        raise UsageError(
            "data frames need pandas, which is not installed", hint="pip install 'ondevice-farm[frames]'"
        ) from None
    return pandas.DataFrame.from_records(list(rows), columns=list(columns))
