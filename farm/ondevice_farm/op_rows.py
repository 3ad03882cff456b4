"""Reading a job document's op rows (`ops[]`): each kernel's time by the statistic its share is of.

The rows are written by `ondevice_farm.analysis.op_table`; reports, traces and the terminal read
them here, without numpy (a submit through a running controller prints its report in a process
that should not pay for importing it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: the statistics a row's `share_of` names
MEDIAN_US = "median_us"
MEAN_US = "mean_us"


def op_time_us(op: Mapping[str, Any]) -> float | None:
    """A row's time by the statistic its share is of (rows stored before medians: the mean);
    None where the device recorded the op's placement but not its time."""
    value = op.get(str(op.get("share_of") or MEAN_US))
    return None if value is None else float(value)


def op_statistic_label(ops: Sequence[Mapping[str, Any]]) -> str:
    """What a report's op-time column shows, from its rows: "median" or "mean"."""
    return "median" if ops and all(op.get("share_of") == MEDIAN_US for op in ops) else "mean"
