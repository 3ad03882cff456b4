"""Put jobs on units: find the units a submission needs, start their actors, run, collect."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agents.base import AgentSettings, DeviceRun, DeviceUnit, RunRequest
from farm.compile.report import CompiledArtifact
from farm.controller.selection import DeviceSelector
from farm.errors import DeviceLostError, FarmError, SchedulingError
from farm.profiles import DeviceProfile


@dataclass
class Job:
    base: dict[str, Any]
    selector: DeviceSelector
    artifact: CompiledArtifact
    request: RunRequest


@dataclass
class UnitHandle:
    unit: DeviceUnit
    actor: Any
    queued: int = 0


@dataclass
class Outcome:
    run: DeviceRun | None = None
    error: FarmError | None = None
    timing: dict[str, Any] = field(default_factory=dict)


def _local_node_strategy() -> Any:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def attach_units(
    selectors: list[DeviceSelector], profiles: dict[str, DeviceProfile], settings: AgentSettings
) -> dict[str, list[UnitHandle]]:
    """Discover this node's units of the wanted platforms and start one actor per wanted unit."""
    import ray

    from farm.controller.actor import device_actor_class, discover_task

    strategy = _local_node_strategy()
    platforms = sorted({profiles[s.profile].platform for s in selectors})
    found: list[DeviceUnit] = []
    for platform in platforms:
        try:
            found += ray.get(discover_task().options(scheduling_strategy=strategy).remote(platform, settings))
        except ray.exceptions.RayTaskError as exc:
            raise _unwrap(exc) from None
    handles: dict[str, list[UnitHandle]] = {}
    actor_cls = device_actor_class()
    for selector in selectors:
        matching = [u for u in found if u.profile == selector.profile
                    and (selector.serial is None or u.serial == selector.serial)]
        if not matching:
            attached = ", ".join(sorted({u.name for u in found})) or "none"
            raise SchedulingError(f"no unit of {selector} is attached to this host (attached: {attached})")
        for unit in matching:
            existing = handles.setdefault(str(selector), [])
            if any(h.unit == unit for h in existing):
                continue
            actor = actor_cls.options(scheduling_strategy=strategy).remote(
                unit, settings, profiles[unit.profile].thermal
            )
            existing.append(UnitHandle(unit=unit, actor=actor))
    return handles


def _unwrap(exc: BaseException) -> FarmError:
    """Ray wraps what an actor raised; the farm wants its own error back, or a device-lost one."""
    import ray

    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = exc.cause
        if isinstance(cause, FarmError):
            return cause
        return FarmError(f"{type(cause).__name__}: {cause}")
    if isinstance(exc, ray.exceptions.RayActorError | ray.exceptions.NodeDiedError):
        return DeviceLostError(f"the device's actor died: {str(exc).splitlines()[0]}")
    if isinstance(exc, FarmError):
        return exc
    return FarmError(f"{type(exc).__name__}: {exc}")


def run_jobs(jobs: list[Job], units: dict[str, list[UnitHandle]]) -> Iterator[tuple[Job, Outcome]]:
    """Queue each job on the least-loaded unit of its selector; yield outcomes as they finish."""
    import ray

    in_flight: dict[Any, tuple[Job, float]] = {}
    for job in jobs:
        handle = min(units[str(job.selector)], key=lambda h: h.queued)
        handle.queued += 1
        in_flight[handle.actor.run_job.remote(job.request)] = (job, time.time())
    while in_flight:
        ready, _ = ray.wait(list(in_flight), num_returns=1)
        job, queued_at = in_flight.pop(ready[0])
        outcome = Outcome(timing={"queued_at": queued_at})
        try:
            done = ray.get(ready[0])
        except Exception as exc:  # anything the actor raised, or its death
            outcome.error = _unwrap(exc)
            outcome.timing["finished_at"] = time.time()
        else:
            outcome.run = done.run
            outcome.timing.update(unit=done.unit.serial, started_at=done.started_at,
                                  finished_at=done.finished_at,
                                  duration_s=done.finished_at - done.started_at)
        yield job, outcome
