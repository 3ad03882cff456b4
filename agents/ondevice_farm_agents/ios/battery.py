"""Energy per inference on an iPhone, from the battery values its diagnostics relay exposes.

The host reads the IORegistry entry of class `IOPMPowerSource` (pymobiledevice3's
`DiagnosticsService.ioregistry`, what `pymobiledevice3 diagnostics battery` prints): the gauge's
`InstantAmperage` (mA, signed: negative while the battery discharges) and `Voltage` (mV), and
`ExternalConnected` / `IsCharging`. It samples them over an idle window before launching
FarmRunner and all through the job; the app reports, on its own clock, when its loaded window
(the timed runs, extended to the job's `min_active_s`) began and ended, and how many predictions
it held. `ondevice_farm.analysis.energy` turns that into energy per inference (loaded minus idle,
with its uncertainty), the same estimate Android jobs get.

A phone on a charger gets no figure, only the reason: the gauge then reads the charger's current
minus the phone's. An iPhone on the host's USB port draws from it, so energy needs a phone
reached over Wi-Fi (`ios_connection: any`) and off USB power (docs/ios.md).

Settings (`AgentSettings.extra`, all optional): `ios_energy_idle_s` (0 turns energy off),
`ios_energy_min_active_s`, `ios_energy_sample_s`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from ondevice_farm_agents.base import EnergyEstimate
from ondevice_farm_agents.extra import extra_number
from ondevice_farm_agents.ios.link import DeviceLink

#: seconds of idle sampled before the app is launched (the baseline)
DEFAULT_ENERGY_IDLE_S = 3.0
#: the app's loaded window lasts at least this long (its gauge updates about once a second)
DEFAULT_ENERGY_MIN_ACTIVE_S = 3.0
#: one diagnostics-relay round trip per sample; the gauge itself updates more slowly
DEFAULT_ENERGY_SAMPLE_S = 0.25
#: the longest idle, active or sampling window a setting may ask for
MAX_ENERGY_S = 3600.0
POWER_SOURCE_CLASS = "IOPMPowerSource"
CHARGING_KEYS = ("ExternalConnected", "IsCharging", "AppleRawExternalConnected")
_MA_TO_UA = 1000.0
_MV_TO_UV = 1000.0


@dataclass(frozen=True)
class EnergySettings:
    idle_s: float = DEFAULT_ENERGY_IDLE_S
    min_active_s: float = DEFAULT_ENERGY_MIN_ACTIVE_S
    sample_s: float = DEFAULT_ENERGY_SAMPLE_S

    @classmethod
    def from_extra(cls, extra: dict[str, str]) -> EnergySettings:
        return cls(
            idle_s=extra_number(extra, "ios_energy_idle_s", DEFAULT_ENERGY_IDLE_S, 0.0, MAX_ENERGY_S),
            min_active_s=extra_number(
                extra, "ios_energy_min_active_s", DEFAULT_ENERGY_MIN_ACTIVE_S, 0.0, MAX_ENERGY_S
            ),
            sample_s=extra_number(extra, "ios_energy_sample_s", DEFAULT_ENERGY_SAMPLE_S, 0.001, MAX_ENERGY_S),
        )

    @property
    def enabled(self) -> bool:
        return self.idle_s > 0


def _absence(first: BatteryReading) -> str:
    """Why no energy figure can come from this phone now ("" where one can)."""
    if first.charging:
        return _CHARGING_REASON
    if first.current_ma is None or first.voltage_mv is None:
        return (
            f"the phone's diagnostics relay shows no battery current and voltage ({POWER_SOURCE_CLASS} "
            "InstantAmperage/Amperage and Voltage)"
        )
    return ""


def _signed_64(value: int) -> int:
    # IOKit keeps the gauge's current as a 64-bit two's complement; some tools print it unsigned
    return value - (1 << 64) if value >= 1 << 63 else value


def _number(registry: dict[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = registry.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return float(_signed_64(value))
        if isinstance(value, float):
            return value
    return None


@dataclass(frozen=True)
class BatteryReading:
    """One IORegistry read: host wall clock, gauge current (mA) and voltage (mV), charging."""

    t_s: float
    current_ma: float | None
    voltage_mv: float | None
    charging: bool

    @classmethod
    def from_registry(cls, t_s: float, registry: dict[str, Any] | None) -> BatteryReading:
        registry = registry or {}
        return cls(
            t_s,
            # the plain Amperage is a filtered figure that lags; older iOS has only it
            _number(registry, "InstantAmperage", "Amperage"),
            _number(registry, "Voltage", "AppleRawBatteryVoltage"),
            any(registry.get(key) is True for key in CHARGING_KEYS),
        )


@dataclass
class BatteryLog:
    """The readings of one job: the idle window's edges, then every reading in time order."""

    readings: list[BatteryReading] = field(default_factory=list)
    idle_span_s: tuple[float, float] | None = None
    absent: str = ""


class BatterySampler:
    def __init__(self, link: DeviceLink, settings: EnergySettings) -> None:
        self._link = link
        self._settings = settings
        self.log = BatteryLog()

    async def _read(self, diagnostics: Any) -> None:
        registry = await diagnostics.ioregistry(ioclass=POWER_SOURCE_CLASS)
        self.log.readings.append(BatteryReading.from_registry(time.time(), registry))

    def idle(self) -> None:
        """The idle window before the job; a phone on a charger skips it and gets its reason."""

        async def sample() -> None:
            async with self._link.provider.diagnostics(self._link.serial) as diagnostics:
                await self._read(diagnostics)
                self.log.absent = _absence(self.log.readings[-1])
                if self.log.absent:
                    return
                start = time.time()
                while time.time() - start < self._settings.idle_s:
                    await asyncio.sleep(self._settings.sample_s)
                    await self._read(diagnostics)
                self.log.idle_span_s = (start, time.time())

        self._link.call(sample(), "sampling the battery at idle", timeout_s=self._settings.idle_s + 30.0)

    @asynccontextmanager
    async def during_job(self) -> AsyncIterator[None]:
        """Samples in the background while the job runs (on the bridge's loop)."""
        if self.log.absent:
            yield
            return
        stop = asyncio.Event()

        async def loop() -> None:
            async with self._link.provider.diagnostics(self._link.serial) as diagnostics:
                while not stop.is_set():
                    await self._read(diagnostics)
                    try:
                        await asyncio.wait_for(stop.wait(), timeout=self._settings.sample_s)
                    except TimeoutError:
                        continue

        task = asyncio.create_task(loop())
        try:
            yield
        finally:
            stop.set()
            try:
                await task
            except Exception as exc:  # the job's outcome stands; the figure says why it is missing
                self.log.absent = (
                    f"the battery could not be sampled during the job ({type(exc).__name__}: {exc})"
                )


_CHARGING_REASON = (
    "the phone is on external power (IOPMPowerSource ExternalConnected/IsCharging): the gauge reads "
    "the charger's current minus the phone's; reach the phone over Wi-Fi, off USB power (docs/ios.md)"
)


def _method(sample_s: float, idle_s: float, active_s: float, inferences: int) -> str:
    return (
        f"iPhone IORegistry IOPMPowerSource InstantAmperage x Voltage (diagnostics relay), sampled by the "
        f"host every {sample_s:g} s; the mean power over {idle_s:.1f} s idle before the app was launched "
        f"subtracted from the mean over {active_s:.1f} s of predictions ({inferences}), times that time, "
        f"divided by the predictions; the loaded window is timed on the phone's clock, the samples on "
        f"the host's"
    )


def energy_from_log(
    log: BatteryLog, active_span_s: tuple[float, float] | None, inferences: int, sample_s: float
) -> EnergyEstimate:
    """The job's energy per inference from its battery log and the app's loaded window."""
    from ondevice_farm.analysis.energy import energy_estimate

    if log.absent:
        return EnergyEstimate(absent=log.absent)
    if log.idle_span_s is None or active_span_s is None:
        return EnergyEstimate(absent="no idle window or no loaded window to compare")
    if any(r.charging for r in log.readings):
        return EnergyEstimate(absent=_CHARGING_REASON)
    usable = [r for r in log.readings if r.current_ma is not None and r.voltage_mv is not None]
    section = {
        "idle": {"start_s": log.idle_span_s[0], "end_s": log.idle_span_s[1]},
        "active": {"start_s": active_span_s[0], "end_s": active_span_s[1], "inferences": inferences},
        "t_s": [r.t_s for r in usable],
        "current_ua": [(r.current_ma or 0.0) * _MA_TO_UA for r in usable],
        "voltage_uv": [(r.voltage_mv or 0.0) * _MV_TO_UV for r in usable],
        "sample_period_ms": sample_s * 1000.0,
        "unreadable_samples": len(log.readings) - len(usable),
    }
    estimate = energy_estimate(section)
    idle_s = log.idle_span_s[1] - log.idle_span_s[0]
    method = _method(sample_s, idle_s, active_span_s[1] - active_span_s[0], inferences)
    return dataclasses.replace(estimate, method=method)
