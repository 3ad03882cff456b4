"""What does a scrape of `/metrics` cost on a large farm?

Fills a results store with DEVICES x MODELS series (one target each), HISTORY stored jobs per
series, every job a copy of a real host-cpu job document (op table and trace included, as the
pipeline stores them), then serves it with `start_metrics_server` and a fleet of two units per
device, and times GETs of /metrics over loopback:
  cold: the first scrape (parses the newest document of every series)
  warm: later scrapes (documents cached by job id; the store is still queried every time)
side by side with reading the same newest jobs whole through `ResultsStore.latest_jobs()`, and
one night's run read whole (`jobs()`) against its summaries paged (`iter_run_job_summaries()`,
docs/results.md "Stored jobs: summary and bulky parts").
Goal: a warm scrape under 100 ms. Prints the response size and the series count.

    python benchmarks/metrics_scrape.py [--devices 50] [--models 100] [--history 3] [--job JOB.json]
                                        [--store postgresql://...]

--store fills that (empty) PostgreSQL database instead of a SQLite file in a temp folder.

Without --job it runs `farm submit examples/tinynet.onnx --devices host-cpu` once for a real
document (starts an embedded Ray: run it as scripts/test runs the tests, in a loopback-only
network namespace).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from ondevice_farm.metrics.collector import DEFAULT_DURATION_BUCKETS_S
from ondevice_farm.metrics.fleet_state import FleetSnapshot, UnitState
from ondevice_farm.metrics.latest import JOB_PATHS
from ondevice_farm.metrics.server import start_metrics_server
from ondevice_farm.store import ResultsStore, StoreLocation

REPO = Path(__file__).resolve().parents[1]
GOAL_S = 0.100
WARM_SCRAPES = 20


class Fleet:
    def __init__(self, devices: int) -> None:
        self.value = FleetSnapshot(
            devices=tuple(
                UnitState(f"device-{d:02d}", f"serial-{d:02d}-{u}", up=True, busy=u == 0)
                for d in range(devices)
                for u in range(2)
            ),
            queue_jobs=7,
        )

    def snapshot(self) -> FleetSnapshot:
        return self.value


def real_job(home: Path) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ondevice_farm",
            "--home",
            str(home),
            "submit",
            str(REPO / "examples/tinynet.onnx"),
            "--devices",
            "host-cpu",
            "--runs",
            "20",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    job: dict[str, Any] = json.loads(done.stdout)["jobs"][0]
    return job


def fill(store_path: StoreLocation, job: dict[str, Any], devices: int, models: int, history: int) -> int:
    written = 0
    with ResultsStore(store_path) as store:
        for night in range(history):
            run_id = f"bench-{night:03d}"
            store.start_run(run_id, "nightly", {}, suite="bench")
            for d in range(devices):
                for m in range(models):
                    copied = copy.deepcopy(job)
                    shift = (night - history) * 86400.0
                    copied.update(
                        job_id=f"{run_id}-{d:02d}-{m:03d}",
                        run_id=run_id,
                        device=f"device-{d:02d}",
                        unit=f"serial-{d:02d}-{m % 2}",
                        model={"name": f"model-{m:03d}", "sha256": "0" * 64},
                        queued_at=job["queued_at"] + shift,
                        started_at=job["started_at"] + shift,
                        finished_at=job["finished_at"] + shift,
                    )
                    store.add_job(run_id, copied)
                    written += 1
            store.finish_run(run_id, "complete")
    return written


def _size(store_path: StoreLocation) -> str:
    return f"{store_path.stat().st_size / 2**20:.0f} MiB" if isinstance(store_path, Path) else "PostgreSQL"


def store_reads_after_landing(store_path: StoreLocation, job: dict[str, Any], times: int = 5) -> list[float]:
    """What the collector reads from the store when a job has landed since the last scrape:
    the watermark, the newest job per series, the new job's values, the duration histogram."""
    took = []
    with ResultsStore(store_path) as store:
        for n in range(times):
            store.add_job(
                "bench-001",
                {**job, "job_id": f"read-{n}", "model": {"name": f"read-{n}", "sha256": "0" * 64}},
            )
            start = time.perf_counter()
            with store.read_snapshot():
                store.jobs_version()
                store.latest_job_ids()
                store.job_fields([f"read-{n}"], JOB_PATHS)
                store.job_duration_buckets(DEFAULT_DURATION_BUCKETS_S)
            took.append(time.perf_counter() - start)
    return took


def get(url: str, gzipped: bool = False) -> tuple[float, bytes]:
    """One scrape as Prometheus makes it (it asks for gzip), timed to the last byte."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gzipped else {})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        body = response.read()
    return time.perf_counter() - start, body


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--devices", type=int, default=50)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--history", type=int, default=3, help="stored jobs per series (nightlies)")
    parser.add_argument("--job", type=Path, help="a job document (JSON) to copy instead of running one")
    parser.add_argument("--store", help="an empty PostgreSQL database's URL to fill instead of SQLite")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp:
        directory = Path(tmp)
        job = json.loads(args.job.read_text()) if args.job else real_job(directory / "home")
        store_path: StoreLocation = args.store or directory / "results.sqlite"
        start = time.perf_counter()
        jobs = fill(store_path, job, args.devices, args.models, args.history)
        print(
            f"store: {jobs} jobs ({args.devices} devices x {args.models} models x {args.history} nightlies),"
            f" {_size(store_path)}, filled in {time.perf_counter() - start:.1f} s"
        )

        with ResultsStore(store_path) as store:
            start = time.perf_counter()
            whole = store.latest_jobs()
            whole_s = time.perf_counter() - start
            start = time.perf_counter()
            night = store.jobs("bench-000")
            night_whole_s = time.perf_counter() - start
            start = time.perf_counter()
            summaries = sum(1 for _ in store.iter_run_job_summaries("bench-000"))
            night_summaries_s = time.perf_counter() - start
        reads = store_reads_after_landing(store_path, job)
        server = start_metrics_server(store_path, port=0, fleet=Fleet(args.devices))
        try:
            cold_s, body = get(server.url, gzipped=True)
            warm = [get(server.url, gzipped=True)[0] for _ in range(WARM_SCRAPES)]
            plain = [get(server.url)[0] for _ in range(WARM_SCRAPES)]
            zipped = get(server.url, gzipped=True)[1]
            body = get(server.url)[1]
            landed = []
            with ResultsStore(store_path) as store:
                for n in range(5):  # a nightly in progress: one more job before each scrape
                    extra = {
                        **job,
                        "job_id": f"landed-{n}",
                        "model": {"name": f"landed-{n}", "sha256": "0" * 64},
                    }
                    store.add_job("bench-000", extra)
                    landed.append(get(server.url, gzipped=True)[0])
        finally:
            server.stop()

    series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    warm_s = statistics.median(warm)
    print(f"newest jobs: {len(whole)} series")
    print(f"response: {len(body) / 1024:.0f} KiB ({len(zipped) / 1024:.0f} KiB gzipped), {series} series")
    print(f"{'latest_jobs() (whole documents)':<36} {whole_s * 1000:8.1f} ms")
    print(f"{'one night whole: jobs() (' + str(len(night)) + ')':<36} {night_whole_s * 1000:8.1f} ms")
    print(f"{'its summaries, paged (' + str(summaries) + ')':<36} {night_summaries_s * 1000:8.1f} ms")
    print(f"{'store reads after a job landed (median)':<36} {statistics.median(reads) * 1000:8.1f} ms")
    print(f"{'cold scrape (first, gzip)':<36} {cold_s * 1000:8.1f} ms")
    print(f"{'scrape after a job landed (median)':<36} {statistics.median(landed) * 1000:8.1f} ms")
    print(f"{'warm scrape, plain (median)':<36} {statistics.median(plain) * 1000:8.1f} ms")
    print(
        f"{'warm scrape, gzip (median of ' + str(WARM_SCRAPES) + ')':<36} {warm_s * 1000:8.1f} ms"
        f"   max {max(warm) * 1000:.1f} ms"
    )
    print(
        f"warm / goal ({GOAL_S * 1000:.0f} ms): {warm_s / GOAL_S:.2f}   "
        f"latest_jobs() / warm scrape: {whole_s / warm_s:.1f}x"
    )


if __name__ == "__main__":
    main()
