"""The text exposition `farm serve` answers `/metrics` with, fast on a large farm.

A lab of 40 profiles x 100 models x 3 targets has 12,000 combinations, up to 15 samples each
(the series budget, `ondevice_farm.metrics.budget`): formatting 180,000 samples on every scrape
(prometheus_client's `generate_latest`) takes seconds.
Those samples only change when a job lands, and a stored job never changes, so each result's
lines are formatted once, kept by job id, and a scrape joins them; the whole block (and its
gzip) is reused while no job lands. The small, live part (fleet, job counts, durations) is
formatted by `generate_latest` at every scrape. The bytes are those `generate_latest` would
write for the same collector (tests/metrics check it).
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from ondevice_farm.metrics.collector import FarmCollector, StoreState, result_families
from ondevice_farm.metrics.fleet_state import FleetSnapshot
from ondevice_farm.metrics.latest import LatestResult

#: the classic text format, which every Prometheus 2.x and 3.x reads; the names are legacy-safe
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: fast rather than small: the block is recompressed whenever a job lands
GZIP_LEVEL = 1

StartResponse = Callable[..., Any]


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def _escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _go_float(value: float) -> str:
    return str(floatToGoString(value))  # type: ignore[no-untyped-call]


def _sample_line(sample: Sample) -> str:
    labels = ",".join(f'{name}="{_escape_value(value)}"' for name, value in sample.labels.items())
    return f"{sample.name}{{{labels}}} {_go_float(sample.value)}\n"


def _header(family: Metric) -> str:
    doc = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {family.name} {doc}\n# TYPE {family.name} {family.type}\n"


def _live_key(state: StoreState, fleet: FleetSnapshot | None) -> object:
    """What the live part depends on, or None when it cannot be told (an unhashable fleet)."""
    if state.version is None:
        return None
    key = (state.version, tuple(sorted(state.nightlies.items())), fleet)
    try:
        hash(key)
    except TypeError:
        return None
    return key


class CachedExposition:
    """Renders a FarmCollector's scrape; one per server, called from its request threads."""

    def __init__(self, collector: FarmCollector) -> None:
        self._collector = collector
        self._headers = [_header(family) for family in result_families([])]
        self._lines: dict[str, list[str]] = {}
        self._block_key: object = None
        self._live_key: object = None
        self._live = b""
        self._block = b""
        self._block_gz = b""
        self._lock = threading.Lock()

    def _result_lines(self, result: LatestResult) -> list[str]:
        return ["".join(_sample_line(s) for s in family.samples) for family in result_families([result])]

    def render(self, *, compressed: bool) -> bytes:
        state, fleet = self._collector.read()
        with self._lock:
            live_key = _live_key(state, fleet)
            if live_key is None or live_key != self._live_key:
                self._live = generate_latest(_Families(self._collector.live_families(state, fleet)))
                self._live_key = live_key
            live = self._live
            key = state.version if state.version is not None else tuple(state.latest)
            if key != self._block_key:
                lines = {
                    job_id: self._lines.get(job_id) or self._result_lines(r)
                    for job_id, r in state.latest.items()
                }
                self._lines = lines
                parts = []
                for index, header in enumerate(self._headers):
                    parts.append(header)
                    parts.extend(per_job[index] for per_job in lines.values())
                self._block = "".join(parts).encode()
                self._block_gz = b""
                self._block_key = key
            if not compressed:
                return self._block + live
            if not self._block_gz:
                self._block_gz = gzip.compress(self._block, GZIP_LEVEL)
            # A gzip stream may hold several members; readers (Prometheus's included) join them.
            return self._block_gz + gzip.compress(live, GZIP_LEVEL)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        compressed = "gzip" in environ.get("HTTP_ACCEPT_ENCODING", "")
        body = self.render(compressed=compressed)
        headers = [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body)))]
        if compressed:
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        return [body]
