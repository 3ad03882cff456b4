"""`DeviceActor`: one Ray actor per attached unit, on the node the unit is plugged into.

The actor owns its agent; the unit runs one job at a time because an actor handles one
call at a time (max_concurrency=1), with the profile's cool-down between jobs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agents.base import AgentSettings, DeviceRun, DeviceUnit, Health, RunRequest
from agents.registry import agent_class
from farm.profiles import ThermalLimits


@dataclass(frozen=True)
class JobOnUnit:
    """A job's measurements and when the unit started and finished it (wall clock)."""

    run: DeviceRun
    unit: DeviceUnit
    started_at: float
    finished_at: float


class DeviceActorImpl:
    """The plain class; `device_actor_class()` makes it a Ray actor."""

    def __init__(self, unit: DeviceUnit, settings: AgentSettings, thermal: ThermalLimits) -> None:
        self.unit = unit
        self.thermal = thermal
        self.agent = agent_class(unit.platform)(settings)
        self._last_job_end: float | None = None

    def describe(self) -> dict[str, Any]:
        import ray

        return {"unit": self.unit, "node_id": ray.get_runtime_context().get_node_id()}

    def health(self) -> Health:
        return self.agent.health(self.unit)

    def run_job(self, request: RunRequest) -> JobOnUnit:
        try:
            if self._last_job_end is not None and self.thermal.cooldown_s > 0:
                wait_s = self._last_job_end + self.thermal.cooldown_s - time.monotonic()
                if wait_s > 0:
                    time.sleep(wait_s)
            started_at = time.time()
            self.agent.prepare(self.unit, request)
            run = self.agent.run(self.unit, request)
            return JobOnUnit(run=run, unit=self.unit, started_at=started_at, finished_at=time.time())
        finally:
            self._last_job_end = time.monotonic()

    def close(self) -> None:
        self.agent.close()


def discover_units(platform: str, settings: AgentSettings) -> list[DeviceUnit]:
    """Run on the node whose units are wanted (a Ray task pinned there)."""
    agent = agent_class(platform)(settings)
    try:
        return agent.discover()
    finally:
        agent.close()


def device_actor_class() -> Any:
    import ray

    return ray.remote(num_cpus=0, max_concurrency=1, max_restarts=0)(DeviceActorImpl)


def discover_task() -> Any:
    import ray

    return ray.remote(num_cpus=0)(discover_units)
