"""The fleet's queue at a lab's size: a host dies mid-night, and its units' pinned jobs expire.

    .venv/bin/python benchmarks/queue_expiry.py [--sizes 30000,300000] [--before-sizes 30000,60000]

A night of N jobs pinned over 1,000 units (`pixel8:*`-style: N/1,000 jobs per unit), 20 units
per host; one host dies, so its 20 units' N/50 jobs wait and then expire. Measured on the
`Schedule` itself (no Ray): the two deadline checks (the jobs begin to wait; they expire) and the
cost of starting one job when one unit frees (the steady state of a night), for the queue now
(`controller/queue_lines.py`: a line per selector) and, side by side in the same run, the queue
before it (commit 267d34c: one deque per submission, `deque.remove` per expiry, a scan of the
queue per start), loaded from git. Goal: the expiry of a dead host's jobs in a 300,000-job
queue under 1 s, and the time per job flat from 30,000 to 300,000 queued jobs.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BEFORE_COMMIT = "267d34c"
UNITS = 1000
UNITS_PER_HOST = 20
STARTS = 200


def before_module() -> ModuleType:
    source = subprocess.run(
        ["git", "show", f"{BEFORE_COMMIT}:farm/ondevice_farm/controller/queue.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    spec = importlib.util.spec_from_loader("queue_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["queue_before"] = module
    exec(compile(source, "queue_before.py", "exec"), module.__dict__)
    return module


def night(queue: Any, jobs: int) -> tuple[Any, float]:
    """A schedule with every unit busy and `jobs` pinned jobs queued; seconds to enqueue them."""
    from ondevice_farm.controller.selection import DeviceSelector
    from ondevice_farm.targets import Target
    from ondevice_farm_agents.base import DeviceUnit, RunRequest

    schedule = queue.Schedule()
    for host in range(UNITS // UNITS_PER_HOST):
        slots = [
            queue.UnitSlot(
                unit=DeviceUnit("pixel8", f"u{host * UNITS_PER_HOST + i}", "android"),
                actor=f"a{host}-{i}",
                node_id=f"host{host}",
            )
            for i in range(UNITS_PER_HOST)
        ]
        schedule.register(f"host{host}", slots)
    request = RunRequest(
        artifact=Path("/m.onnx"), artifact_sha256="0" * 64, target=Target.parse("ort/cpu"),
        inputs={"x": np.zeros(1, np.float32)},
    )  # fmt: skip
    specs = [
        queue.JobSpec(
            job_id=f"j{i}",
            selector=DeviceSelector("pixel8", f"u{i % UNITS}"),
            request=request,
            expected_s=float(i % 7),
            placement_deadline_s=600.0,
        )
        for i in range(jobs)
    ]
    began = time.perf_counter()
    schedule.enqueue("night", specs)
    enqueue_s = time.perf_counter() - began
    # every unit busy with a job of another submission: the night's jobs all wait in the queue
    schedule.enqueue("earlier", [queue.JobSpec(job_id=f"e{i}", selector=DeviceSelector("pixel8", f"u{i}"),
                                               request=request) for i in range(UNITS)])  # fmt: skip
    for _job, _slot in schedule.assign(now=0.0):
        pass
    return schedule, enqueue_s


def expiries(result: Any) -> int:
    expired = result[1] if isinstance(result, tuple) else result.expired
    return len(expired)


def measure(queue: Any, jobs: int) -> dict[str, float]:
    schedule, enqueue_s = night(queue, jobs)
    schedule.mark_node_down("host0", "its Ray node died")
    began = time.perf_counter()
    schedule.unplaceable(now=1000.0)
    wait_s = time.perf_counter() - began
    began = time.perf_counter()
    expired = expiries(schedule.unplaceable(now=1000.0 + 600.0))
    expire_s = time.perf_counter() - began
    assert expired == jobs // (UNITS // UNITS_PER_HOST), expired
    # steady state: one unit frees, the next job starts on it
    running = [job_id for job_id in list(schedule.running) if job_id.startswith("e")]
    began = time.perf_counter()
    started = 0
    for job_id in running[UNITS_PER_HOST : UNITS_PER_HOST + STARTS]:
        schedule.release(job_id, now=2000.0)
        started += len(schedule.assign(now=2000.0))
    start_s = (time.perf_counter() - began) / STARTS
    assert started == STARTS, started
    return {"enqueue_s": enqueue_s, "wait_s": wait_s, "expire_s": expire_s, "start_ms": start_s * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sizes = lambda s: [int(v) for v in s.split(",")]  # noqa: E731
    parser.add_argument("--sizes", type=sizes, default=[30_000, 300_000])
    parser.add_argument(
        "--before-sizes", type=sizes, default=[30_000, 60_000], help="the old queue is quadratic"
    )
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "farm"), str(ROOT / "agents"), str(ROOT)]
    from ondevice_farm.controller import queue as now_queue

    before = before_module()
    rows = [("now", n, measure(now_queue, n)) for n in args.sizes]
    rows += [(f"before ({BEFORE_COMMIT})", n, measure(before, n)) for n in args.before_sizes]
    header = ("queue", "jobs", "expired", "enqueue s", "wait s", "expire s", "start ms")
    print(f"{header[0]:<18} " + " ".join(f"{h:>9}" for h in header[1:]))
    for name, n, figures in rows:
        print(
            f"{name:<18} {n:>9,} {n // (UNITS // UNITS_PER_HOST):>9,} {figures['enqueue_s']:>9.3f}"
            f" {figures['wait_s']:>9.3f} {figures['expire_s']:>9.3f} {figures['start_ms']:>9.3f}"
        )
    now = {n: f for name, n, f in rows if name == "now"}
    small, large = min(now), max(now)
    growth = now[large]["start_ms"] / now[small]["start_ms"]
    verdict = "PASS" if now[large]["expire_s"] < 1.0 and growth < 2.0 else "FAIL"
    print(
        f"\nnow: expiring {large // (UNITS // UNITS_PER_HOST):,} jobs of a dead host in a {large:,}-job queue"
        f" {now[large]['expire_s']:.3f} s (goal < 1 s); a start costs {growth:.2f}x at {large:,} what it"
        f" costs at {small:,} queued (goal < 2x): {verdict}"
    )
    shared = sorted(set(now) & {n for name, n, _ in rows if name != "now"})
    for n in shared:
        old = next(f for name, m, f in rows if name != "now" and m == n)
        print(
            f"at {n:,} jobs, before/now: expire {old['expire_s'] / now[n]['expire_s']:.0f}x,"
            f" start {old['start_ms'] / now[n]['start_ms']:.0f}x"
        )


if __name__ == "__main__":
    main()
