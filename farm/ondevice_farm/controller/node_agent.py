"""The units of one Ray node: discover them, start a `DeviceActor` each, keep the fleet told.

`farm agent` runs one `NodeAgent` per lab host; an embedded `farm submit` runs one for its
own host. The agent's process owns the actors: if the host dies, so do they, and the fleet
retries their jobs elsewhere.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ondevice_farm.controller.fleet import UnitEntry
from ondevice_farm.errors import FarmError, SchedulingError
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm_agents.base import AgentSettings, DeviceUnit
from ondevice_farm_agents.registry import AGENTS

log = logging.getLogger(__name__)

DEFAULT_REDISCOVER_S = 10.0
#: simulated units exist for load tests; an agent serves them only when asked to
SIMULATED_PLATFORM = "simulated"


def default_platforms(simulated: bool = False) -> tuple[str, ...]:
    return tuple(p for p in AGENTS if p != SIMULATED_PLATFORM or simulated)


@dataclass(frozen=True)
class NodeAgentConfig:
    platforms: tuple[str, ...]
    #: where shipped artifacts are cached on this node
    cache_dir: Path | None = None
    rediscover_s: float = DEFAULT_REDISCOVER_S


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
        self.actors: dict[str, tuple[DeviceUnit, Any]] = {}
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
        """Actors for the units attached now; actors of vanished units are stopped."""
        import ray

        from ondevice_farm.controller.actor import device_actor_class

        units = {u.name: u for u in self.discover()}
        for name in [n for n in self.actors if n not in units]:
            unit, actor = self.actors.pop(name)
            log.info("unit %s vanished", name)
            ray.kill(actor)
        actor_cls = device_actor_class()
        cache = str(self.config.cache_dir) if self.config.cache_dir else None
        for name, unit in units.items():
            if name not in self.actors:
                actor = actor_cls.options(scheduling_strategy=node_strategy(self.node_id)).remote(
                    unit, self.settings, cache
                )
                self.actors[name] = (unit, actor)
                log.info("unit %s attached", name)
        return [
            UnitEntry(unit=u, actor=a, cooldown_s=self.profiles[u.profile].thermal.cooldown_s)
            for u, a in self.actors.values()
        ]

    def register(self, fleet: Any) -> dict[str, list[str]]:
        import ray

        result: dict[str, list[str]] = ray.get(fleet.register.remote(self.node_id, self.sync()))
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

        for _, actor in self.actors.values():
            ray.kill(actor)
        self.actors.clear()


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
