"""The CLI edge: the one place that reads `FARM_*` environment variables and turns errors
into one line on stderr and an exit code."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ondevice_farm.config import FarmHome, default_home
from ondevice_farm.errors import FarmError
from ondevice_farm.profiles import DEFAULT_PROFILES_DIR, DeviceProfile, load_profiles
from ondevice_farm.store_sql import StoreLocation, is_postgres_url

if TYPE_CHECKING:
    from ondevice_farm.python_api.place import Farm
    from ondevice_farm_agents.base import AgentSettings

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    debug: bool = False
    home_dir: Path | None = None
    profiles_dir: Path | None = None
    store_url: str | None = None

    @property
    def home(self) -> FarmHome:
        return FarmHome(self.home_dir or Path(os.environ.get("FARM_HOME") or default_home()))

    @property
    def store(self) -> StoreLocation:
        """`--store`, else $FARM_STORE, else the farm directory's SQLite file."""
        chosen = self.store_url or os.environ.get("FARM_STORE")
        if not chosen:
            return self.home.store_path
        return chosen if is_postgres_url(chosen) else Path(chosen).expanduser()

    @property
    def profiles_path(self) -> Path:
        """`--profiles-dir`, else $FARM_PROFILES_DIR, else the profiles that ship with the farm."""
        return self.profiles_dir or Path(os.environ.get("FARM_PROFILES_DIR") or DEFAULT_PROFILES_DIR)

    def profiles(self) -> dict[str, DeviceProfile]:
        return load_profiles(self.profiles_path)

    def agent_settings(self, profiles: dict[str, DeviceProfile], adb: tuple[str, ...] = ()) -> AgentSettings:
        env_adb = tuple(a for a in os.environ.get("FARM_ADB_DEVICES", "").split(",") if a.strip())
        key = os.environ.get("FARM_ADB_KEY")
        from ondevice_farm_agents.base import AgentSettings

        extra = {
            k[len("FARM_AGENT_") :].lower(): v for k, v in os.environ.items() if k.startswith("FARM_AGENT_")
        }
        return AgentSettings(
            profiles=profiles,
            adb_tcp_addresses=tuple(adb) + env_adb,
            adb_usb=os.environ.get("FARM_ADB_USB", "") == "1",
            adb_key_path=Path(key) if key else None,
            session_omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
            extra=extra,
        )


def fail(message: str, code: int, hint: str = "") -> None:
    line = f"farm: error: {message}"
    if hint:
        line += f" (hint: {hint})"
    click.echo(line, err=True)
    sys.exit(code)


def handles_errors(func: F) -> F:
    """FarmError -> `farm: error: ...` on one line, its exit code; anything else -> exit 70."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        state = click.get_current_context().find_object(CliState) or CliState()
        try:
            return func(*args, **kwargs)
        except FarmError as exc:
            if state.debug:
                traceback.print_exc()
            fail(exc.message, exc.exit_code, exc.hint)
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except (click.ClickException, click.exceptions.Exit, SystemExit):
            raise
        except Exception as exc:
            if state.debug:
                traceback.print_exc()
            fail(f"internal error: {type(exc).__name__}: {exc}", 70, "rerun with --debug and report it")
        return None

    return wrapper  # type: ignore[return-value]


def farm_of(
    state: CliState, address: str | None, adb: tuple[str, ...] = (), *, embedded: bool = False
) -> Farm:
    """The Python API's `Farm` for a command: its flags, else `$RAY_ADDRESS` and the other `FARM_*`
    variables (read here, at the CLI's edge, never below)."""
    from ondevice_farm.python_api.place import Farm

    def fleet() -> tuple[dict[str, DeviceProfile], AgentSettings]:
        return fleet_settings(state, adb)

    return Farm(
        home=state.home.root,
        address=address or os.environ.get("RAY_ADDRESS") or None,
        store=state.store,
        profiles_dir=state.profiles_path,
        adb=adb,
        embedded=embedded,
        fleet_settings=fleet,
    )


#: `FARM_SIMULATED_DEVICES=N`: serve N simulated units (scheduler load tests; never by default)
SIMULATED_ENV = "FARM_SIMULATED_DEVICES"


def fleet_settings(
    state: CliState, adb: tuple[str, ...] = (), simulated: int | None = None
) -> tuple[dict[str, DeviceProfile], AgentSettings]:
    """Profiles and agent settings; simulated units join only when asked for (flag or env)."""
    from dataclasses import replace

    profiles = state.profiles()
    settings = state.agent_settings(profiles, adb)
    count = simulated if simulated is not None else os.environ.get(SIMULATED_ENV)
    if count is not None and str(count) not in ("", "0"):
        from ondevice_farm_agents.simulated.profile import with_simulated

        profiles = with_simulated(profiles)
        extra = {**settings.extra, "simulated_units": str(count)}
        settings = replace(settings, profiles=profiles, extra=extra)
    return profiles, settings
