"""`farm report` in a terminal: the columns of the comparison as one table, metrics as rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.table import Table

from ondevice_farm.reports.compare import Column


def _ms(value: Any) -> str:
    return "-" if value is None else f"{float(value):.3f}"


def _worst(column: Column, key: str, pick: Callable[[list[float]], float]) -> str:
    values = [float(o[key]) for o in column.outputs().values() if o.get(key) is not None]
    return "-" if not values else f"{pick(values):.3g}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _delegation(column: Column) -> str:
    """A runtime with a delegate: nodes the delegate took / nodes left on the runtime's own kernels."""
    counts = column.delegation()
    return "-" if counts is None else f"{counts[0]} / {counts[1]}"


ROWS: tuple[tuple[str, Callable[[Column], str]], ...] = (
    ("status", lambda c: c.status if c.ok else f"failed: {(c.error or '')[:40]}"),
    ("p50 ms", lambda c: _ms(c.latency.get("p50"))),
    ("p90 ms", lambda c: _ms(c.latency.get("p90"))),
    ("p99 ms", lambda c: _ms(c.latency.get("p99"))),
    ("cv", lambda c: "-" if c.latency.get("cv") is None else f"{c.latency['cv']:.3f}"),
    ("first inference ms", lambda c: _ms(c.job.get("first_inference_ms"))),
    ("load ms", lambda c: _ms(c.job.get("load_ms"))),
    ("warm load ms", lambda c: _ms(c.job.get("warm_load_ms"))),
    (
        "peak memory MB",
        lambda c: "-" if c.job.get("peak_memory_mb") is None else f"{c.job['peak_memory_mb']:.1f}",
    ),
    (
        "nodes before -> after",
        lambda c: f"{c.compile.get('nodes_before', '-')} -> {c.compile.get('nodes_after', '-')}",
    ),
    ("precision", lambda c: c.precision or "-"),
    ("partitions", lambda c: str(c.compile.get("partitions", "-"))),
    ("kernels per backend", lambda c: ", ".join(f"{b} {n}" for b, n in sorted(c.placement().items())) or "-"),
    ("CPU fallbacks", lambda c: str(len(c.fallbacks))),
    ("delegated / fallback nodes", lambda c: _delegation(c)),
    ("artifact KiB", lambda c: "-" if c.artifact_bytes is None else f"{c.artifact_bytes / 1024:.1f}"),
    ("fallback share", lambda c: _share(c.fallback_share())),
    ("worst SNR dB", lambda c: _worst(c, "snr_db", min)),
    ("worst max |err|", lambda c: _worst(c, "max_abs", max)),
)


def side_by_side_table(columns: list[Column]) -> Table:
    table = Table(title="Side by side", title_justify="left")
    table.add_column("metric", style="bold")
    for column in columns:
        table.add_column(column.label, justify="right")
    for name, cell in ROWS:
        table.add_row(name, *(cell(column) for column in columns))
    return table
