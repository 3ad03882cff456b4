"""The farm directory's disk use on `/metrics`, as `farm serve` serves it, before and after `farm gc`."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from ondevice_farm.api.blobs import BlobStore
from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.config import FarmHome
from ondevice_farm.gc.policy import RetentionPolicy
from ondevice_farm.gc.schedule import collect_once
from ondevice_farm.metrics.disk import DiskUsage
from ondevice_farm.metrics.server import start_metrics_server
from ondevice_farm.store import ResultsStore
from tests.compare.conftest import matmul_chain


def scrape(url: str, compressed: bool) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if compressed else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def du(root: Path) -> int:
    total = os.lstat(root).st_blocks * 512
    for folder, dirs, files in os.walk(root):
        total += sum(os.lstat(os.path.join(folder, n)).st_blocks * 512 for n in (*dirs, *files))
    return total


def test_cache_bytes_and_free_space_are_served_and_follow_gc(tmp_path: Path) -> None:
    home = FarmHome(tmp_path / "home").ensure()
    ResultsStore(home.store_path).close()
    store = ArtifactStore(home.artifacts)
    for layers in (1, 2, 3):
        _, path = store.put(matmul_chain(tmp_path / f"m{layers}.onnx", layers, width=64), "model.onnx")
        old = time.time() - 90 * 86400
        os.utime(path.parent, (old, old))
        os.utime(path, (old, old))
    (home.references / "x.npz").write_bytes(b"0" * 10_000)
    server = start_metrics_server(home.store_path, "127.0.0.1", 0, disk=DiskUsage(home, scan_interval_s=0))
    try:
        for compressed in (False, True):
            samples = scrape(server.url, compressed)
            assert samples[("farm_cache_bytes", (("cache", "artifacts"),))] == du(home.artifacts)
            assert samples[("farm_cache_bytes", (("cache", "references"),))] == du(home.references)
            assert samples[("farm_cache_bytes", (("cache", "store"),))] > 0
            stats = os.statvfs(home.root)
            assert samples[("farm_home_filesystem_size_bytes", ())] == stats.f_blocks * stats.f_frsize
            assert (
                abs(samples[("farm_home_filesystem_avail_bytes", ())] - stats.f_bavail * stats.f_frsize)
                < 64e6
            )
            assert ("farm_store_up", ()) in samples  # the farm's own metrics are still there
        before = samples[("farm_cache_bytes", (("cache", "artifacts"),))]
        outcome = collect_once(home, home.store_path, RetentionPolicy(keep_days=30))
        assert outcome.result is not None and len(outcome.result.removed) == 3
        after = scrape(server.url, False)[("farm_cache_bytes", (("cache", "artifacts"),))]
        assert before - after == outcome.result.freed_bytes() and after == du(home.artifacts)
    finally:
        server.stop()


def test_an_upload_counts_once_with_its_named_links(tmp_path: Path) -> None:
    """`farm serve` keeps an upload as a blob and hard links under the names submitters gave."""
    home = FarmHome(tmp_path / "home")
    blobs = BlobStore(home.root / "uploads")
    data = os.urandom(200_000)
    sha = hashlib.sha256(data).hexdigest()
    blobs.put(sha, io.BytesIO(data), len(data))
    blobs.path(sha, "model.onnx")
    blobs.path(sha, "renamed.onnx")
    old = time.time() - 90 * 86400
    for item in (home.root / "uploads" / sha).iterdir():
        os.utime(item, (old, old))
    os.utime(home.root / "uploads" / sha, (old, old))
    du_bytes = int(subprocess.run(["du", "-s", "-B1", str(home.root / "uploads" / sha)], capture_output=True,
                                  text=True, check=True).stdout.split()[0])  # fmt: skip
    outcome = collect_once(home, home.store_path, RetentionPolicy(), dry_run=True)
    [upload] = outcome.plan.removals
    assert upload.kind == "uploads" and upload.size_bytes == du_bytes
    assert du_bytes < 2 * len(data)
