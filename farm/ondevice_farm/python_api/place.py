"""`Farm`: where the farm's work happens and is kept, the Python API's one configuration value.

The CLI builds one from its flags and `FARM_*` (the only place those are read); from Python it is
plain data with the CLI's defaults (`~/.cache/farm`, the profiles that ship with the farm, an embedded
local Ray)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ondevice_farm.config import FarmHome, default_home
from ondevice_farm.profiles import DEFAULT_PROFILES_DIR, DeviceProfile, load_profiles
from ondevice_farm.store import StoreLocation

if TYPE_CHECKING:
    from ondevice_farm_agents.base import AgentSettings


@dataclass(frozen=True)
class Farm:
    """Where a call runs and what it reads and writes.

    `address`: a running `farm serve` (its submit API `http://HOST:PORT`, or its Ray address
    `HOST:PORT`); None runs here on an embedded local Ray. `home`: the farm directory (artifacts,
    caches, the results store unless `store` names another). `adb`: Android units over TCP
    (`host:port`) an embedded run attaches."""

    home: Path | str | None = None
    address: str | None = None
    store: StoreLocation | None = None
    profiles_dir: Path | str | None = None
    adb: tuple[str, ...] = ()
    #: run here even when a `farm serve` of this farm directory is up (`farm submit --embedded`)
    embedded: bool = False
    #: the profiles and agents' settings as the CLI builds them (from its `FARM_*` variables), called
    #: only where agents start here; None: from the fields above
    fleet_settings: Callable[[], tuple[dict[str, DeviceProfile], AgentSettings]] | None = field(
        default=None, compare=False, repr=False
    )

    @property
    def farm_home(self) -> FarmHome:
        return FarmHome(Path(self.home) if self.home is not None else default_home())

    @property
    def store_location(self) -> StoreLocation:
        return self.store if self.store is not None else self.farm_home.store_path

    def profiles(self) -> dict[str, DeviceProfile]:
        return load_profiles(
            Path(self.profiles_dir) if self.profiles_dir is not None else DEFAULT_PROFILES_DIR
        )

    def fleet(self) -> tuple[dict[str, DeviceProfile], AgentSettings]:
        """The profiles and the agents' settings an embedded run starts its agents with."""
        if self.fleet_settings is not None:
            return self.fleet_settings()
        from ondevice_farm_agents.base import AgentSettings

        profiles = self.profiles()
        return profiles, AgentSettings(profiles=profiles, adb_tcp_addresses=self.adb)

    def with_address(self, address: str | None) -> Farm:
        return self if address is None else replace(self, address=address)
