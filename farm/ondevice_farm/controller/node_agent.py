"""The units of one Ray node: discover them, start a `DeviceActor` each, keep the fleet told.

`farm agent` runs one `NodeAgent` per lab host; an embedded `farm submit` runs one for its
own host. The agent's process owns the actors: if the host dies, so do they, and the fleet
retries their jobs elsewhere.

A real unit has an actor (a process) of its own, so a hung USB call or a crashed session takes
down that unit only. Simulated units (`SHARED_ACTOR_PLATFORMS`) share one threaded actor per node
and platform, sized to the units discovered with it: a lab of a thousand costs a few processes.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ondevice_farm.controller.fleet import UnitEntry
from ondevice_farm.errors import FarmError, SchedulingError
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm_agents.base import AgentSettings, DeviceUnit
from ondevice_farm_agents.registry import AGENTS

log = logging.getLogger(__name__)

DEFAULT_REDISCOVER_S = 10.0
#: a unit's actor that does not answer its liveness call this soon is busy, and asked again later
DEFAULT_ALIVE_TIMEOUT_S = 5.0
#: simulated units exist for load tests; an agent serves them only when asked to
SIMULATED_PLATFORM = "simulated"
#: platforms whose units of one node share an actor: a job there is a wait, not a device's work
SHARED_ACTOR_PLATFORMS = frozenset({SIMULATED_PLATFORM})


def default_platforms(simulated: bool = False) -> tuple[str, ...]:
    return tuple(p for p in AGENTS if p != SIMULATED_PLATFORM or simulated)


@dataclass(frozen=True)
class NodeAgentConfig:
    platforms: tuple[str, ...]
    #: where shipped artifacts are cached on this node
    cache_dir: Path | None = None
    rediscover_s: float = DEFAULT_REDISCOVER_S
    #: how long each discovery waits for the units' actors to say they are alive
    alive_timeout_s: float = DEFAULT_ALIVE_TIMEOUT_S


@dataclass
class _SharedActor:
    platform: str
    handle: Any
    #: the units it was started for: its `max_concurrency`
    capacity: int
    names: set[str] = field(default_factory=set)


def node_strategy(node_id: str) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


class NodeAgent:
    def __init__(
        self, config: NodeAgentConfig, settings: AgentSettings, profiles: dict[str, DeviceProfile]
    ) -> None:
        import ray

        self.config = config
        self.settings = settings
        self.profiles = profiles
        self.node_id: str = ray.get_runtime_context().get_node_id()
        #: unit name -> (unit, what the fleet calls: its own actor, or a `SharedUnit`)
        self.actors: dict[str, tuple[DeviceUnit, Any]] = {}
        #: the shared actors, each with the number of units it was sized for and the names it serves
        self.shared: list[_SharedActor] = []
        self.errors: dict[str, str] = {}

    def discover(self) -> list[DeviceUnit]:
        from ondevice_farm.controller.actor import discover_units

        found: list[DeviceUnit] = []
        for platform in self.config.platforms:
            try:
                units = discover_units(platform, self.settings)
            except Exception as exc:  # one platform's trouble (no usbmuxd) must not hide the others
                reason = str(exc) if isinstance(exc, FarmError) else f"{type(exc).__name__}: {exc}"
                if self.errors.get(platform) != reason:
                    log.warning("cannot discover %s units: %s", platform, reason)
                self.errors[platform] = reason
                continue
            self.errors.pop(platform, None)
            found += [u for u in units if u.profile in self.profiles]
        return found

    def sync(self) -> list[UnitEntry]:
        """Actors for the units attached now (simulated ones: a shared actor's `SharedUnit`s);
        actors of vanished units are stopped."""

        from ondevice_farm.controller.actor import device_actor_class

        units = {u.name: u for u in self.discover()}
        self.forget_dead()
        for name in [n for n in self.actors if n not in units]:
            unit, actor = self.actors.pop(name)
            log.info("unit %s vanished", name)
            self._release(name, actor)
        actor_cls = device_actor_class()
        cache = str(self.config.cache_dir) if self.config.cache_dir else None
        new = [u for name, u in units.items() if name not in self.actors]
        for unit in [u for u in new if u.platform not in SHARED_ACTOR_PLATFORMS]:
            actor = actor_cls.options(scheduling_strategy=node_strategy(self.node_id)).remote(
                unit, self.settings, cache
            )
            self.actors[unit.name] = (unit, actor)
            log.info("unit %s attached", unit.name)
        for platform in sorted({u.platform for u in new if u.platform in SHARED_ACTOR_PLATFORMS}):
            self._attach_shared([u for u in new if u.platform == platform], actor_cls, cache)
        return [
            UnitEntry(unit=u, actor=a, cooldown_s=self.profiles[u.profile].thermal.cooldown_s)
            for u, a in self.actors.values()
        ]

    def _attach_shared(self, units: list[DeviceUnit], actor_cls: Any, cache: str | None) -> None:
        """Units of one shared platform: into a shared actor with room (a unit that came back),
        else into a new one sized for them all."""
        from ondevice_farm.controller.actor import shared_actor_options

        platform = units[0].platform
        for shared in self.shared:
            while units and shared.platform == platform and len(shared.names) < shared.capacity:
                unit = units.pop(0)
                self._serve(shared, unit)
        if not units:
            return
        handle = actor_cls.options(
            scheduling_strategy=node_strategy(self.node_id), **shared_actor_options(len(units))
        ).remote(units[0], self.settings, cache)
        shared = _SharedActor(platform, handle, len(units))
        self.shared.append(shared)
        log.info("%d %s unit(s) share one actor", len(units), platform)
        for unit in units:
            self._serve(shared, unit)

    def _serve(self, shared: _SharedActor, unit: DeviceUnit) -> None:
        from ondevice_farm.controller.actor import SharedUnit

        shared.names.add(unit.name)
        self.actors[unit.name] = (unit, SharedUnit(shared.handle, unit))
        log.debug("unit %s attached", unit.name)

    def _release(self, name: str, actor: Any) -> None:
        """A vanished unit's actor stops; a shared one only once it serves no unit."""
        import ray

        for shared in self.shared:
            if name in shared.names:
                shared.names.discard(name)
                if not shared.names:
                    self.shared.remove(shared)
                    ray.kill(shared.handle)
                return
        ray.kill(actor)

    def _handles(self) -> dict[str, Any]:
        """Each unit's Ray actor (a shared actor's units name the same one)."""
        from ondevice_farm.controller.actor import SharedUnit

        return {
            name: actor.actor if isinstance(actor, SharedUnit) else actor
            for name, (_, actor) in self.actors.items()
        }

    def forget_dead(self, names: list[str] | None = None) -> list[str]:
        """Units whose actor died (`names`: as the fleet said; else each actor is asked, in its
        control group, and one whose call fails is dead): their actors are dropped, so this
        sync starts new ones. An actor that does not answer within `alive_timeout_s` is busy,
        not dead: it is asked again next time."""
        handles = self._handles()
        if names is None:
            dead_ids = self._dead_actor_ids(handles)
        else:
            dead_ids = {id(handles[n]) for n in names if n in handles}
        dead = [name for name, h in handles.items() if id(h) in dead_ids]
        for name in dead:
            self.actors.pop(name)
            log.warning("unit %s: its actor died; starting another", name)
        self.shared = [s for s in self.shared if id(s.handle) not in dead_ids]
        return dead

    def _dead_actor_ids(self, handles: dict[str, Any]) -> set[int]:
        """The ids of the actors among `handles` whose liveness call failed because they died."""
        import ray
        import ray.exceptions as rex

        from ondevice_farm.controller.actor import CONTROL_GROUP

        distinct = {id(h): h for h in handles.values()}
        if not distinct:
            return set()
        asked = {
            key: h.alive.options(concurrency_group=CONTROL_GROUP).remote() for key, h in distinct.items()
        }
        ready, _ = ray.wait(list(asked.values()), num_returns=len(asked), timeout=self.config.alive_timeout_s)
        answered = {ref.hex() for ref in ready}
        dead: set[int] = set()
        for key, ref in asked.items():
            if ref.hex() not in answered:
                continue
            try:
                ray.get(ref)
            except rex.RayActorError:
                dead.add(key)
            except Exception as exc:  # an answer, with an error: alive
                log.warning("liveness check of a unit's actor failed: %s", exc)
        return dead

    def register(self, fleet: Any) -> dict[str, list[str]]:
        import ray

        result: dict[str, list[str]] = ray.get(fleet.register.remote(self.node_id, self.sync()))
        if result.get("dead"):
            # the fleet saw these actors die: new ones now, not at the next discovery
            self.forget_dead(result["dead"])
            result = ray.get(fleet.register.remote(self.node_id, self.sync()))
        return result

    def serve_forever(self, stop: threading.Event, fleet_lookup: Any) -> None:
        """Re-discover every `rediscover_s`; re-register with whichever fleet is running now."""
        while not stop.is_set():
            try:
                self.register(fleet_lookup())
            except SchedulingError as exc:
                log.warning("%s; retrying in %.0fs", exc, self.config.rediscover_s)
            except Exception as exc:  # a fleet that died between lookup and call
                log.warning("cannot register with the fleet (%s); retrying", type(exc).__name__)
            stop.wait(self.config.rediscover_s)

    def close(self) -> None:
        import ray

        from ondevice_farm.controller.actor import SharedUnit

        for _, actor in self.actors.values():
            if not isinstance(actor, SharedUnit):
                ray.kill(actor)
        for shared in self.shared:
            ray.kill(shared.handle)
        self.actors.clear()
        self.shared.clear()


def find_fleet() -> Any:
    """The running fleet actor, or a SchedulingError that says how to start one."""
    import ray

    from ondevice_farm.controller.cluster import RAY_NAMESPACE
    from ondevice_farm.controller.fleet import FLEET_ACTOR_NAME

    try:
        return ray.get_actor(FLEET_ACTOR_NAME, namespace=RAY_NAMESPACE)
    except ValueError:
        raise SchedulingError(
            "no farm controller is running on this Ray cluster",
            hint="start `farm serve --address HEAD` on the head node",
        ) from None
