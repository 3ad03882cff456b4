"""Whether a unit can tell energy per inference: its battery readable, and not on a charger.

Before a native-runner job the agent runs one shell command (`probe_command`): `dumpsys battery`
(the battery service's view: AC/USB/Wireless/Dock powered, `status`, and "UPDATES STOPPED" where
`dumpsys battery unplug`/`set` froze it) and the battery's own sysfs files (`status`,
`current_now`, `voltage_now`). A unit on a charger gets no figure, only the reason: the current
the gauge reads is then the charger's minus the device's, not the device's draw.

Settings (`AgentSettings.extra`, all optional): `battery_dir` (default
/sys/class/power_supply/battery), `energy_idle_s`, `energy_min_active_s`, `energy_sample_ms`,
`energy_settle_s` (the `DEFAULT_*` below); `energy_idle_s: 0` turns energy off.
"""

from __future__ import annotations

from dataclasses import dataclass

from ondevice_farm_agents.android.device_paths import q
from ondevice_farm_agents.android.thermal import parse_battery
from ondevice_farm_agents.extra import extra_number

DEFAULT_BATTERY_DIR = "/sys/class/power_supply/battery"
#: seconds of idle sampled before the timed runs (the baseline)
DEFAULT_ENERGY_IDLE_S = 3.0
#: the timed runs are followed by untimed ones until the loaded window lasts this long
DEFAULT_ENERGY_MIN_ACTIVE_S = 3.0
#: a fuel gauge updates every few hundred ms at best; 50 ms oversamples it cheaply
DEFAULT_ENERGY_SAMPLE_MS = 50.0
#: a pause after the warm-up, before the idle window, part of neither window: ORT's intra-op
#: workers keep spinning for a few hundred ms after a run (measured: ~0.35 s on the ADB peer)
DEFAULT_ENERGY_SETTLE_S = 1.0
MAX_ENERGY_S = 3600.0
_SYSFS_MARK = "__farm_battery_sysfs__"
#: android.os.BatteryManager.BATTERY_STATUS_CHARGING
STATUS_CHARGING = "2"
POWER_SOURCES = ("AC", "USB", "Wireless", "Dock")
UNPLUG_HINT = (
    "unplug it, or make the OS report it unplugged with `adb shell dumpsys battery unplug` "
    "(`adb shell cmd battery unplug` on recent Android; `dumpsys battery reset` undoes it) — that "
    "does not stop the charger feeding the battery, so the figure is then only the change between "
    "idle and load, estimated"
)


@dataclass(frozen=True)
class EnergySettings:
    battery_dir: str = DEFAULT_BATTERY_DIR
    idle_s: float = DEFAULT_ENERGY_IDLE_S
    min_active_s: float = DEFAULT_ENERGY_MIN_ACTIVE_S
    sample_ms: float = DEFAULT_ENERGY_SAMPLE_MS
    settle_s: float = DEFAULT_ENERGY_SETTLE_S

    @classmethod
    def from_extra(cls, extra: dict[str, str]) -> EnergySettings:
        """From `AgentSettings.extra` (at the CLI: `FARM_AGENT_ENERGY_IDLE_S` and so on)."""

        def seconds(key: str, default: float, least: float) -> float:
            return extra_number(extra, key, default, least, MAX_ENERGY_S)

        return cls(
            battery_dir=extra.get("battery_dir", DEFAULT_BATTERY_DIR),
            idle_s=seconds("energy_idle_s", DEFAULT_ENERGY_IDLE_S, 0.0),
            min_active_s=seconds("energy_min_active_s", DEFAULT_ENERGY_MIN_ACTIVE_S, 0.0),
            sample_ms=seconds("energy_sample_ms", DEFAULT_ENERGY_SAMPLE_MS, 1.0),
            settle_s=seconds("energy_settle_s", DEFAULT_ENERGY_SETTLE_S, 0.0),
        )

    def runner_args(self) -> list[str]:
        """The native runner's arguments that turn sampling on."""
        return [
            "--battery-dir",
            self.battery_dir,
            "--energy-idle-s",
            f"{self.idle_s:g}",
            "--energy-min-active-s",
            f"{self.min_active_s:g}",
            "--energy-sample-ms",
            f"{self.sample_ms:g}",
            "--energy-settle-s",
            f"{self.settle_s:g}",
        ]


@dataclass(frozen=True)
class BatteryState:
    """What the probe found. `powered`: the battery service's charger sources that are on."""

    powered: tuple[str, ...] = ()
    service_status: str = ""
    #: `dumpsys battery unplug`/`set` froze the service's state: it no longer follows the hardware
    updates_stopped: bool = False
    has_service: bool = False
    sysfs_status: str = ""
    sysfs_readable: bool = False

    def absence(self, battery_dir: str) -> str:
        """Why this unit cannot give an energy figure now; "" where it can."""
        if not self.sysfs_readable:
            return (
                f"no readable {battery_dir}/current_now and voltage_now on this unit (closed by "
                "SELinux on some builds, or no battery)"
            )
        if self.powered:
            return (
                f"the device is charging ({' and '.join(self.powered)} powered); energy needs a device "
                f"off the charger: {UNPLUG_HINT}"
            )
        if not self.updates_stopped and (
            self.service_status == STATUS_CHARGING or self.sysfs_status.lower() == "charging"
        ):
            return (
                "the battery reports that it is charging; energy needs a device off the charger: "
                f"{UNPLUG_HINT}"
            )
        return ""

    def notes(self) -> list[str]:
        if self.updates_stopped:
            return [
                "the battery service's state is frozen (dumpsys battery unplug/set): a charger may "
                f"still feed the battery (sysfs status: {self.sysfs_status or 'unknown'}), so the energy "
                "figure is only the change between idle and load"
            ]
        return []


def probe_command(battery_dir: str) -> str:
    d = q(battery_dir)
    return (
        "if command -v dumpsys >/dev/null 2>&1; then dumpsys battery 2>/dev/null; fi; "
        f"echo {_SYSFS_MARK}; cat {d}/status 2>/dev/null || echo; "
        f"cat {d}/current_now {d}/voltage_now 2>/dev/null; true"
    )


def parse_probe(text: str) -> BatteryState:
    service_text, mark, sysfs_text = text.partition(_SYSFS_MARK)
    service = parse_battery(service_text) if mark else {}
    powered = tuple(s for s in POWER_SOURCES if service.get(f"{s} powered", "").lower() == "true")
    lines = sysfs_text.strip("\n").split("\n") if mark else []
    status = lines[0].strip() if lines else ""
    numbers = [line.strip() for line in lines[1:] if line.strip()]
    readable = len(numbers) == 2 and all(n.lstrip("-").isdigit() for n in numbers)
    return BatteryState(
        powered=powered,
        service_status=service.get("status", ""),
        updates_stopped="UPDATES STOPPED" in service_text,
        has_service="Current Battery Service state" in service_text,
        sysfs_status=status,
        sysfs_readable=readable,
    )
