"""Scheduler load test: many simulated units over a real multi-node Ray cluster on this machine.

    unshare -n sh -c 'ip link set lo up && .venv/bin/python benchmarks/scheduler.py'

Defaults: 200 units on 4 worker nodes, 2000 jobs of mixed durations (0.2-0.6 s, 0.8-1.6 s,
2.4-4.8 s in equal shares, times --scale 3: scaled down from minutes so the run takes a few
minutes on 2 cores; at --scale 1 the short jobs at the end complete 500 times a second, which
saturates 2 cores shared by 5 raylets, the racks, the fleet and the driver). The real
fleet actor (`farm/ondevice_farm/controller/fleet.py`) schedules them; each node's units are served by one
asyncio "rack" actor that sleeps for the job's duration (200 actor processes would not fit a
2-core test machine; the scheduler sees 200 units either way).

Prints, for the queue in submission order (no history) and longest-first (durations known from
a baseline, as `farm nightly` does): makespan / lower bound (goal <= 1.05), the dispatch gap per
job on a unit (its previous job's end to this one's start; goal < 20 ms at the median), and the
fleet actor's resident memory.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fleet.cluster import new_cluster

#: job durations: a third short, a third medium, a third long, uniform within each class
DURATIONS_S = ((0.2, 0.6), (0.8, 1.6), (2.4, 4.8))


class SimRack:
    """Many simulated units in one asyncio actor: a job sleeps `runs` milliseconds."""

    async def run_job(self, serial: str, profile: str, request: Any, blob: Any = None) -> Any:
        from ondevice_farm.controller.actor import JobOnUnit
        from ondevice_farm_agents.base import DeviceRun, DeviceUnit

        started = time.time()
        await asyncio.sleep(request.runs / 1000.0)
        run = DeviceRun(load_ms=0.0, first_inference_ms=0.0, samples_ms=[1.0] * 3, outputs={}, runner="rack")
        return JobOnUnit(
            run=run,
            unit=DeviceUnit(profile, serial, "simulated"),
            started_at=started,
            finished_at=time.time(),
        )


class _Method:
    def __init__(self, rack: Any, serial: str, profile: str) -> None:
        self.rack, self.serial, self.profile = rack, serial, profile

    def remote(self, request: Any, blob: Any = None, job_id: str | None = None) -> Any:
        return self.rack.run_job.remote(self.serial, self.profile, request, blob)


class RackUnit:
    """What the fleet calls `actor` for a unit: `.run_job.remote(request, blob)`, like a DeviceActor."""

    def __init__(self, rack: Any, serial: str, profile: str) -> None:
        self.run_job = _Method(rack, serial, profile)


def specs(count: int, with_history: bool, seed: int, scale: float) -> list[Any]:
    import numpy as np

    from ondevice_farm.controller.queue import JobSpec
    from ondevice_farm.controller.selection import DeviceSelector
    from ondevice_farm.targets import Target
    from ondevice_farm_agents.base import RunRequest

    rng = np.random.default_rng(seed)
    target = Target.parse("ort/cpu")
    out = []
    for i in range(count):
        low, high = DURATIONS_S[int(rng.integers(len(DURATIONS_S)))]
        duration = float(rng.uniform(low, high)) * scale
        request = RunRequest(
            artifact=Path("/dev/null"),
            artifact_sha256="0" * 64,
            target=target,
            inputs={},
            warmup=0,
            runs=int(duration * 1000),
        )
        out.append(
            JobSpec(
                job_id=f"job-{i}",
                selector=DeviceSelector("simulated"),
                request=request,
                expected_s=duration if with_history else None,
            )
        )
    return out


def run_once(fleet: Any, jobs: list[Any], units: int) -> dict[str, float]:
    from ondevice_farm.controller.client import FleetClient

    client = FleetClient(fleet=fleet, embedded=False)
    submitted = time.time()
    events = list(client.run(jobs))
    assert all(e.kind == "done" for e in events), [e.message for e in events if e.kind != "done"][:3]
    durations = [e.finished_at - e.started_at for e in events]
    first_start = min(e.started_at for e in events)
    makespan = max(e.finished_at for e in events) - first_start
    lower = max(sum(durations) / units, max(durations))
    by_unit: dict[str, list[Any]] = {}
    for event in events:
        by_unit.setdefault(event.unit or "", []).append(event)
    gaps = []
    for unit_events in by_unit.values():
        unit_events.sort(key=lambda e: e.started_at)
        gaps += [b.started_at - a.finished_at for a, b in itertools.pairwise(unit_events)]
    return {
        "makespan_s": makespan,
        "lower_bound_s": lower,
        "ratio": makespan / lower,
        "gap_median_ms": statistics.median(gaps) * 1000,
        "gap_p90_ms": statistics.quantiles(gaps, n=10)[-1] * 1000,
        "first_start_s": first_start - submitted,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--scale",
        type=float,
        default=3.0,
        help="multiply the job durations: completions per second on 2 cores stay below saturation",
    )
    args = parser.parse_args()

    cluster = new_cluster()
    try:
        cluster.start_head()
        nodes = [cluster.add_node(f"w{i}", f"127.0.0.{i + 2}") for i in range(args.nodes)]
        cluster.wait_nodes(1 + len(nodes))
        os.environ.update({k: cluster.env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")})
        import ray

        from ondevice_farm.controller.fleet import UnitEntry, fleet_actor_class
        from ondevice_farm.controller.node_agent import node_strategy

        ray.init(address=cluster.address, namespace="farm", log_to_driver=False, logging_level="ERROR")
        alive = {n["NodeManagerAddress"]: n["NodeID"] for n in ray.nodes() if n["Alive"]}
        head = alive["127.0.0.1"]
        fleet = fleet_actor_class().options(scheduling_strategy=node_strategy(head)).remote()
        rack_cls = ray.remote(num_cpus=0, max_concurrency=10000)(SimRack)
        per_node = args.units // args.nodes
        from ondevice_farm_agents.base import DeviceUnit

        for node in nodes:
            node_id = alive[node.ip]
            rack = rack_cls.options(scheduling_strategy=node_strategy(node_id)).remote()
            entries = [
                UnitEntry(
                    unit=DeviceUnit("simulated", f"{node.name}-{u}", "simulated"),
                    actor=RackUnit(rack, f"{node.name}-{u}", "simulated"),
                )
                for u in range(per_node)
            ]
            ray.get(fleet.register.remote(node_id, entries))
        units = per_node * args.nodes
        before = ray.get(fleet.memory_bytes.remote())
        mean_s = statistics.mean(sum(d) / 2 for d in DURATIONS_S) * args.scale
        print(
            f"{units} simulated units on {args.nodes} nodes, {args.jobs} jobs of {DURATIONS_S} s "
            f"x {args.scale} "
            f"(mean {mean_s:.2f} s); fleet actor RSS before {before / 2**20:.0f} MiB"
        )
        print(
            f"{'queue order':<22} {'makespan s':>10} {'lower bd s':>10} {'ratio':>6} {'gap p50 ms':>10} "
            f"{'gap p90 ms':>10} {'fleet RSS MiB':>13}"
        )
        for label, history in (("submission (FIFO)", False), ("longest first (LPT)", True)):
            result = run_once(fleet, specs(args.jobs, history, args.seed, args.scale), units)
            rss = ray.get(fleet.memory_bytes.remote()) / 2**20
            print(
                f"{label:<22} {result['makespan_s']:>10.2f} {result['lower_bound_s']:>10.2f} "
                f"{result['ratio']:>6.3f} {result['gap_median_ms']:>10.1f} {result['gap_p90_ms']:>10.1f} "
                f"{rss:>13.0f}"
            )
        costs = ray.get(fleet.dispatch_overheads_s.remote())
        send, turn = costs["send"], costs["turnaround"]
        print(
            f"fleet's own cost per job: issuing the call median {statistics.median(send) * 1000:.2f} ms; "
            f"result in -> next job out on that unit median {statistics.median(turn) * 1000:.2f} ms, "
            f"p90 {statistics.quantiles(turn, n=10)[-1] * 1000:.2f} ms"
        )
        ray.shutdown()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
