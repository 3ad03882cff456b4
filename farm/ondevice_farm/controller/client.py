"""A submitter's side of the fleet: reach it (or start an embedded one), hand it jobs, stream back.

With an address, the fleet is the one `farm serve` runs on that cluster, and units are those
that `farm agent`s registered. Without one, an embedded local Ray runs a private fleet with
this host's own units, for as long as the submission lasts.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ondevice_farm.controller.cluster import ClusterConfig, ray_cluster
from ondevice_farm.controller.fleet_events import JobEvent
from ondevice_farm.controller.queue import JobSpec
from ondevice_farm.controller.ray_errors import to_farm_error
from ondevice_farm.controller.selection import DeviceSelector
from ondevice_farm.errors import FarmError, JobCancelledError, SchedulingError
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm_agents.base import AgentSettings

if TYPE_CHECKING:
    from ondevice_farm.controller.job_context import RunWriting

#: how long one long-poll of the fleet waits for events before asking again
POLL_S = 1.0
#: artifacts above this size are not shipped through the object store (shared filesystem needed)
MAX_SHIPPED_BYTES = 512 * 1024 * 1024
#: artifacts up to this size travel inside the job's call itself: a driver's first `ray.put`
#: costs about half a second (measured, benchmarks/fleet_overheads.py), a tiny model's bytes nothing
MAX_INLINE_BYTES = 64 * 1024


@dataclass
class FleetClient:
    fleet: Any
    embedded: bool
    #: embedded: platform -> why its discovery failed on this host
    discovery_errors: dict[str, str] = field(default_factory=dict)
    #: set when whoever asked is gone (an HTTP submitter that disconnected): `run` cancels
    stop: threading.Event | None = None

    def units(self) -> list[dict[str, Any]]:
        import ray

        try:
            result: list[dict[str, Any]] = ray.get(self.fleet.units.remote())
        except Exception as exc:
            raise _controller_lost(exc) from None
        return result

    def attached_units(self) -> dict[str, list[str]]:
        """Profile -> the serials of its units up now (what `--devices all` and `pixel8:*` read)."""
        units: dict[str, list[str]] = {}
        for u in self.units():
            if u["up"]:
                units.setdefault(u["unit"].profile, []).append(u["unit"].serial)
        return {profile: sorted(serials) for profile, serials in units.items()}

    def check_attached(self, selectors: list[DeviceSelector]) -> None:
        """Embedded: no unit will appear later, so a selector without one is an error now."""
        units = [u["unit"] for u in self.units() if u["up"]]
        for selector in selectors:
            if not any(selector.matches(u) for u in units):
                attached = ", ".join(sorted(u.name for u in units)) or "none"
                attached += "".join(
                    f"; {p} discovery failed: {e}" for p, e in sorted(self.discovery_errors.items())
                )
                raise SchedulingError(
                    f"no unit of {selector} is attached to this host "
                    f"(units found of the platforms asked for: {attached})"
                )

    def ship(self, path: Path, sha256: str | None = None) -> Any:
        """The artifact in the object store, for nodes without the submitter's files: a file, or a
        directory (`.mlpackage`) as one archive; the node checks the tree's sha256 on arrival."""
        import ray

        from ondevice_farm.artifacts import pack_artifact, sha256_path, tree_size_bytes

        if self.embedded or not path.exists():
            return None
        size_bytes = tree_size_bytes(path)
        if size_bytes > MAX_SHIPPED_BYTES:
            return None
        packed = pack_artifact(path, sha256 or sha256_path(path))
        # a small artifact travels inside the job call: a first `ray.put` costs a submitter ~0.7 s
        return packed if size_bytes <= MAX_INLINE_BYTES else ray.put(packed)

    def run(
        self,
        specs: list[JobSpec],
        on_event: Callable[[JobEvent], None] | None = None,
        run_id: str | None = None,
        writing: RunWriting | None = None,
        owned: bool = False,
        on_submitted: Callable[[], None] | None = None,
    ) -> Iterator[JobEvent]:
        """Submit `specs` as one submission (recording `run_id`, which the controller marks
        interrupted if this submitter vanishes); yield each job's final event as it arrives.
        With `writing`, the fleet stores each job as it finishes and its final event carries a
        summary; without, the `done` event carries the unit's result (`farm compare`'s rounds).
        `owned`: the run is the controller's (fleet_runs.py): if this stops following before its
        end, it goes on, and only `farm cancel` stops it; `on_submitted`: called once the fleet
        has the jobs."""
        import ray

        remaining = {s.job_id for s in specs}
        if len(remaining) != len(specs):
            # one id twice: the fleet would run both and this would hear one, so a job would be lost
            raise SchedulingError(f"{len(specs) - len(remaining)} job id(s) given twice in one submission")
        submission = secrets.token_hex(6)
        submitted = False
        try:
            driver = ray.get_runtime_context().get_job_id()
            ray.get(self.fleet.submit.remote(submission, specs, run_id, writing, driver, owned))
            submitted = True
            if on_submitted is not None:
                on_submitted()
            while remaining:
                if self.stop is not None and self.stop.is_set():
                    raise JobCancelledError("the submission was cancelled: its submitter went away")
                for event in ray.get(self.fleet.poll.remote(submission, POLL_S)):
                    if on_event is not None:
                        on_event(event)
                    if event.final and event.job_id in remaining:
                        remaining.discard(event.job_id)
                        yield event
        except FarmError:
            raise
        except Exception as exc:
            raise _controller_lost(exc) from None
        finally:
            if remaining:
                # a night that is the controller's goes on without this submitter (`unfollow`),
                # unless this stopped before it knew the fleet had it (its recorder then marks it)
                leave = self.fleet.unfollow if owned and submitted else self.fleet.cancel
                with suppress(Exception):
                    ray.get(leave.remote(submission), timeout=5)
            else:
                # every job ended: the fleet forgets the submission now (a submitter that lives on,
                # as `farm serve` does for its API's submissions, would otherwise stay watched)
                with suppress(Exception):
                    self.fleet.cancel.remote(submission)

    def hand_over(self, specs: list[JobSpec], run_id: str, writing: RunWriting) -> None:
        """Submit `specs` as the controller's run, followed by no one (`farm nightly --detach`): the
        fleet stores each job and finishes the run itself."""
        import ray

        try:
            ray.get(self.fleet.submit.remote(secrets.token_hex(6), specs, run_id, writing, None, True, False))
        except FarmError:
            raise
        except Exception as exc:
            raise _controller_lost(exc) from None


def cancel_run(fleet: Any, run: str) -> tuple[str, int]:
    """`farm cancel RUN` (through Ray or the submit API): the run's id and how many of its jobs
    were dropped or stopped (fleet_submissions.py `cancel_run`)."""
    import ray

    from ondevice_farm.controller.results import ControllerStore

    run_id = ControllerStore(fleet).resolve_run_id(run)
    try:
        return run_id, int(ray.get(fleet.cancel_run.remote(run_id)))
    except Exception as exc:
        raise to_farm_error(exc) from None


def _controller_lost(exc: BaseException) -> SchedulingError:
    error = to_farm_error(exc)
    return SchedulingError(
        f"lost the farm controller: {error}",
        hint="completed jobs are in the store; restart `farm serve` and resubmit",
    )


@contextmanager
def fleet_client(
    cluster: ClusterConfig,
    settings: AgentSettings,
    profiles: dict[str, DeviceProfile],
    platforms: tuple[str, ...],
) -> Iterator[FleetClient]:
    """The fleet at `cluster.address`, or an embedded one serving this host's `platforms`."""
    with ray_cluster(cluster):
        if cluster.address is not None:
            from ondevice_farm.controller.node_agent import find_fleet

            yield FleetClient(fleet=find_fleet(), embedded=False)
            return
        import ray

        from ondevice_farm.controller.fleet import fleet_actor_class
        from ondevice_farm.controller.node_agent import NodeAgent, NodeAgentConfig, node_strategy

        agent = NodeAgent(NodeAgentConfig(platforms=platforms), settings, profiles)
        fleet = fleet_actor_class().options(scheduling_strategy=node_strategy(agent.node_id)).remote()
        try:
            agent.register(fleet)
            yield FleetClient(fleet=fleet, embedded=True, discovery_errors=dict(agent.errors))
        finally:
            agent.close()
            ray.kill(fleet)


class FleetStateClient:
    """The fleet's `FleetSnapshot` for the metrics exporter (`ondevice_farm.metrics.fleet_state`)."""

    def __init__(self, fleet: Any, timeout_s: float = 2.0) -> None:
        self.fleet = fleet
        self.timeout_s = timeout_s

    def snapshot(self) -> Any:
        import ray

        from ondevice_farm.metrics.fleet_state import FleetSnapshot

        try:
            return ray.get(self.fleet.snapshot.remote(), timeout=self.timeout_s)
        except Exception:  # a scrape during a controller restart: report an empty fleet
            return FleetSnapshot()
