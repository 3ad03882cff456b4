"""`DeviceActor`: one Ray actor per attached unit, on the node the unit is plugged into.

The actor owns its agent; the fleet sends it one job at a time and keeps the profile's
cool-down between jobs (`farm/ondevice_farm/controller/queue.py`), and `max_concurrency=1` makes a second
call wait rather than share the device. `cancel_job` runs in a concurrency group of its own
(`CONTROL_GROUP`, its own thread), so it reaches the agent while `run_job` is still running.

Simulated units are the exception: a node's simulated units share one threaded actor
(`max_concurrency` = their count), each call naming its unit, because a process per unit would not
fit a lab of a thousand on one machine. The fleet still sees one entry per unit: `SharedUnit` is
that unit's handle, and it answers `run_job`/`cancel_job` as a unit's own actor does.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ondevice_farm.artifacts import ShippedArtifact, unpack_artifact
from ondevice_farm.controller.round_progress import RoundReporter
from ondevice_farm.errors import DeviceError
from ondevice_farm.gc.leases import LeaseBook
from ondevice_farm_agents.base import AgentSettings, DeviceAgent, DeviceRun, DeviceUnit, Health, RunRequest
from ondevice_farm_agents.registry import agent_class
from ondevice_farm_agents.repeats import run_repeats

#: a host's own unit takes its serial from this setting (FARM_AGENT_HOST_SERIAL) when set, so
#: several nodes on one machine, or hosts with one hostname, still have distinct units
HOST_SERIAL_SETTING = "host_serial"
#: the actor's concurrency group for calls that must not wait behind a running job
CONTROL_GROUP = "control"
#: Ray lowers its workers' priority to nice 15 (`worker_niceness`) so they cannot starve the
#: raylet; a DeviceActor's process runs the measurement, which at nice 15 every other process of
#: the node (Ray's own, the submitter, the farm's watchdog) preempts: it keeps the priority a
#: user's own process would have (nice 0), as the bare loop it is compared with does
MEASURING_ENV = {"RAY_worker_niceness": "0"}


@dataclass(frozen=True)
class JobOnUnit:
    """A job's measurements and when the unit started and finished it (wall clock)."""

    run: DeviceRun
    unit: DeviceUnit
    started_at: float
    finished_at: float


class DeviceActorImpl:
    """The plain class; `device_actor_class()` makes it a Ray actor."""

    def __init__(
        self,
        unit: DeviceUnit,
        settings: AgentSettings,
        cache_dir: str | None = None,
        agent_factory: Callable[[AgentSettings], DeviceAgent] | None = None,
    ) -> None:
        #: the unit this actor serves; a shared actor (`SharedUnit`) is told its unit in each call
        self.unit = unit
        # `agent_factory` (picklable) builds the agent in the actor's process: a platform whose
        # transport is a test's fake reaches the same actor code as a real one
        self.agent = (agent_factory or agent_class(unit.platform))(settings)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        #: the jobs running now (fleet job id -> unit), guarded against a cancel meant for the one before
        self._lock = threading.Lock()
        self._running: dict[str, DeviceUnit] = {}

    def describe(self) -> dict[str, Any]:
        import ray

        return {"unit": self.unit, "node_id": ray.get_runtime_context().get_node_id()}

    def health(self, unit: DeviceUnit | None = None) -> Health:
        return self.agent.health(unit or self.unit)

    def _local(self, request: RunRequest, blob: Any) -> RunRequest:
        """The artifact on this node: the submitter's path where shared, else its shipped bytes."""
        if blob is None or request.artifact.exists() or self.cache_dir is None:
            return request
        path = self.cache_dir / request.artifact_sha256 / request.artifact.name
        if not path.exists():  # written only once verified: a cached artifact is not fetched again
            import ray

            # Ray resolves an ObjectRef passed as a task's argument before the call: `blob` is
            # the shipped value here, a ref only where a caller nested it
            shipped = ray.get(blob) if isinstance(blob, ray.ObjectRef) else blob
            if isinstance(shipped, bytes):  # a file's bytes, as a submitter of an older farm ships
                shipped = ShippedArtifact(request.artifact.name, request.artifact_sha256, False, shipped)
            if shipped.sha256 != request.artifact_sha256:
                raise DeviceError(
                    f"shipped artifact is {shipped.sha256[:12]}, expected {request.artifact_sha256[:12]}"
                )
            path = unpack_artifact(shipped, self.cache_dir)
        return dataclasses.replace(request, artifact=path)

    def run_job(
        self,
        request: RunRequest,
        blob: Any = None,
        job_id: str | None = None,
        baseline_blob: Any = None,
        progress_to: Any = None,
        unit: DeviceUnit | None = None,
    ) -> JobOnUnit:
        """`baseline_blob`: a paired job's baseline artifact (A), shipped as `blob` is.
        `progress_to`: the fleet actor, told how a paired job's rounds go (`job_progress`).
        `unit`: the unit to run on, where the actor serves several (`SharedUnit`)."""
        unit = unit or self.unit
        # `farm gc` on this host leaves the cached artifacts alone while the job uses them
        leases = LeaseBook(self.cache_dir.parent) if self.cache_dir is not None else None
        with self._lock:
            if job_id is not None:
                self._running[job_id] = unit
            self.agent.begin_job(unit)
        try:
            with leases.lease() if leases is not None else nullcontext() as lease:
                with lease.placing() if lease is not None else nullcontext():
                    request = self._local(request, blob)
                    if request.paired is not None:
                        baseline = self._local(request.paired.baseline, baseline_blob)
                        request = dataclasses.replace(
                            request, paired=dataclasses.replace(request.paired, baseline=baseline)
                        )
                    if lease is not None and self.cache_dir is not None:
                        used = [request, *([request.paired.baseline] if request.paired is not None else [])]
                        lease.hold(*(f"{self.cache_dir.name}/{r.artifact_sha256}" for r in used))
                started_at = time.time()
                self.agent.prepare(unit, request)
                listener = None
                if progress_to is not None and job_id is not None and request.paired is not None:
                    listener = RoundReporter(lambda text: progress_to.job_progress.remote(job_id, text))
                run = run_repeats(self.agent, unit, request, listener)
        finally:
            with self._lock:
                if job_id is not None:
                    self._running.pop(job_id, None)
        return JobOnUnit(run=run, unit=unit, started_at=started_at, finished_at=time.time())

    def cancel_job(self, job_id: str) -> bool:
        """Stop job `job_id` if one of this actor's units runs it now (call it in `CONTROL_GROUP`);
        whether it did."""
        with self._lock:
            unit = self._running.get(job_id)
            if unit is None:
                return False
            self.agent.cancel(unit)
        return True

    def alive(self) -> bool:
        """The agent's liveness check (call it in `CONTROL_GROUP`, so a running job does not hold
        it up): answering at all is the answer; a dead actor's call fails."""
        return True

    def close(self) -> None:
        self.agent.close()


def discover_units(platform: str, settings: AgentSettings) -> list[DeviceUnit]:
    """The units of one platform attached to this node (call it on that node)."""
    agent = agent_class(platform)(settings)
    try:
        units = agent.discover()
    finally:
        agent.close()
    serial = settings.extra.get(HOST_SERIAL_SETTING)
    if platform == "host" and serial:
        units = [dataclasses.replace(u, serial=serial) for u in units]
    return units


def device_actor_class() -> Any:
    import ray

    options: dict[str, Any] = {
        "num_cpus": 0,
        "max_concurrency": 1,
        "max_restarts": 0,
        "concurrency_groups": {CONTROL_GROUP: 1},
        "runtime_env": {"env_vars": MEASURING_ENV},
    }
    return ray.remote(**options)(DeviceActorImpl)


def shared_actor_options(units: int) -> dict[str, Any]:
    """`device_actor_class().options(...)` of an actor serving `units` units at once: a job each
    (the class's own `CONTROL_GROUP` stays: Ray takes concurrency groups from the class only)."""
    return {"max_concurrency": max(1, units)}


@dataclass(frozen=True)
class _UnitCall:
    """One method of a shared actor, bound to a unit: `.remote(...)` and `.options(...)` as Ray's."""

    method: Any
    unit: DeviceUnit

    def options(self, **options: Any) -> _UnitCall:
        return _UnitCall(self.method.options(**options), self.unit)

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.method.remote(*args, unit=self.unit, **kwargs)


@dataclass(frozen=True)
class SharedUnit:
    """A unit served by a shared actor, as the fleet holds a unit's actor: `run_job` and `health`
    go to the shared actor with the unit named; `cancel_job` needs no unit (job ids are unique).
    Two are equal when they name the same actor and unit, as the fleet's re-registration checks."""

    actor: Any
    unit: DeviceUnit

    @property
    def run_job(self) -> _UnitCall:
        return _UnitCall(self.actor.run_job, self.unit)

    @property
    def health(self) -> _UnitCall:
        return _UnitCall(self.actor.health, self.unit)

    @property
    def cancel_job(self) -> Any:
        return self.actor.cancel_job
