"""A job's per-op table: each kernel's time per profiled run, by its median and its mean, and its share.

One slow profiled run (a preempted thread, a neighbour flushing the cache) moves a kernel's mean
over ten runs by a tenth of its excess, and with it the kernel's share: on a loaded host one Conv
was shown at 1,043 us mean, "50.1%" of a model whose whole p50 was 534 us. The median of the
kernel's time per run does not move. So the table ranks kernels and computes their shares by
the median, where the runner recorded each profiled run (ONNX Runtime's profile, every runner
here), and keeps the mean and the number of runs beside it. Where a runner gives one figure per
op (the iOS agent's estimate from MLComputePlan's cost), that figure is a mean and the table
says so: each row's `share_of` names the statistic its share is of (`ondevice_farm.op_rows`
reads the rows back).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ondevice_farm.measurement import OpTiming
from ondevice_farm.op_rows import MEAN_US, MEDIAN_US


def table_statistic(ops: Sequence[OpTiming]) -> str:
    """MEDIAN_US where every op has a median, else MEAN_US: one statistic for the whole table."""
    return MEDIAN_US if ops and all(op.median_us is not None for op in ops) else MEAN_US


def _time_us(op: OpTiming, statistic: str) -> float:
    return op.median_us if statistic == MEDIAN_US and op.median_us is not None else op.mean_us


def op_table(ops: list[OpTiming], placement_source: str = "measured") -> list[dict[str, Any]]:
    """The job document's `ops` rows, in the order the profile saw the kernels."""
    statistic = table_statistic(ops)
    total = sum(_time_us(op, statistic) for op in ops) or 1.0
    return [
        {
            "name": op.name,
            "op_type": op.op_type,
            "provider": op.provider,
            "median_us": None if op.median_us is None else round(op.median_us, 3),
            "mean_us": round(op.mean_us, 3),
            "runs": op.runs,
            "share": round(_time_us(op, statistic) / total, 6),
            "share_of": statistic,
            "time_source": op.source,
            "placement_source": placement_source,
        }
        for op in ops
    ]
