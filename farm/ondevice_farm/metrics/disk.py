"""The farm directory's disk use on `/metrics`: bytes per cache, and the filesystem's free space.

`farm_cache_bytes{cache}` is measured by walking the caches (blocks on disk, as `du` counts), at
most once every `scan_interval_s`: on a farm of many artifacts a walk takes longer than a scrape
should, and caches grow by the job, not by the second. The filesystem's figures come from
`statvfs` at every scrape. deploy/prometheus/rules.yml alerts on them before the disk fills.
"""

from __future__ import annotations

import gzip
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from ondevice_farm.config import FarmHome
from ondevice_farm.gc.caches import cache_sizes
from ondevice_farm.metrics.exposition import CONTENT_TYPE, GZIP_LEVEL, CachedExposition

#: how old the per-cache figures may be
DEFAULT_DISK_SCAN_INTERVAL_S = 300.0

StartResponse = Callable[..., Any]


class DiskUsage(Collector):
    """The disk-use gauges of one farm directory."""

    def __init__(self, home: FarmHome, scan_interval_s: float = DEFAULT_DISK_SCAN_INTERVAL_S) -> None:
        self.home = home
        self.scan_interval_s = scan_interval_s
        self._sizes: dict[str, int] = {}
        self._scanned_at = -float("inf")
        self._lock = threading.Lock()

    def sizes(self) -> dict[str, int]:
        with self._lock:
            if time.monotonic() - self._scanned_at >= self.scan_interval_s:
                self._sizes = cache_sizes(self.home)
                self._scanned_at = time.monotonic()
            return dict(self._sizes)

    def collect(self) -> Iterable[Metric]:
        caches = GaugeMetricFamily(
            "farm_cache_bytes",
            "Bytes on disk per cache of the farm directory (measured: blocks, as du counts; "
            "`store` is the SQLite results store).",
            labels=["cache"],
        )
        for cache, size in sorted(self.sizes().items()):
            caches.add_metric([cache], float(size))
        avail = GaugeMetricFamily(
            "farm_home_filesystem_avail_bytes",
            "Bytes an unprivileged writer may still use on the filesystem of the farm directory (statvfs).",
        )
        filesystem = GaugeMetricFamily(
            "farm_home_filesystem_size_bytes", "Size of the filesystem of the farm directory (statvfs)."
        )
        try:
            stats = os.statvfs(self.home.root)
        except OSError:  # the directory is gone: no figure rather than a wrong one
            return [caches]
        avail.add_metric([], float(stats.f_bavail * stats.f_frsize))
        filesystem.add_metric([], float(stats.f_blocks * stats.f_frsize))
        return [caches, avail, filesystem]


class _Families(Collector):
    def __init__(self, source: Collector) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        return self._source.collect()


class WithDiskUsage:
    """`/metrics`: the farm's exposition followed by the disk-use gauges (a second gzip member
    when compressed, which Prometheus reads as one stream)."""

    def __init__(self, exposition: CachedExposition, disk: DiskUsage) -> None:
        self._exposition = exposition
        self._disk = disk

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        compressed = "gzip" in environ.get("HTTP_ACCEPT_ENCODING", "")
        body = self._exposition.render(compressed=compressed)
        extra = generate_latest(_Families(self._disk))
        body += gzip.compress(extra, GZIP_LEVEL) if compressed else extra
        headers = [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body)))]
        if compressed:
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        return [body]
