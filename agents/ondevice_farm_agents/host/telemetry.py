"""This host's silicon telemetry from sysfs: CPU frequencies, thermal zones, RAPL energy.

Each is read where the kernel exposes it and readable; virtual machines usually expose none of
them, and a sustained run then says so instead of reporting zeros. `root` lets the tests point the
reader at a sysfs tree of their own.
"""

from __future__ import annotations

from pathlib import Path

from ondevice_farm_agents.base import TelemetrySample
from ondevice_farm_agents.host.rapl import RaplCounter

KHZ_PER_MHZ = 1000.0
MILLIDEGREES_PER_C = 1000.0


def _number(path: Path) -> float | None:
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        return None


class HostTelemetry:
    def __init__(self, root: Path = Path("/")) -> None:
        self.root = root
        sys = root / "sys"
        self._freq = sorted((sys / "devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_cur_freq"))
        self._zones = sorted((sys / "class/thermal").glob("thermal_zone*"))
        self._energy = RaplCounter(root)

    def unavailable(self) -> list[str]:
        missing = []
        if not self._freq:
            missing.append("CPU frequency (no cpufreq in sysfs)")
        if not self._zones:
            missing.append("temperatures (no thermal zones in sysfs)")
        if self._energy.absence():
            missing.append("energy (no readable RAPL counter in /sys/class/powercap)")
        return missing

    def read(self) -> TelemetrySample:
        freq = {}
        for path in self._freq:
            khz = _number(path)
            if khz is not None:
                freq[path.parent.parent.name] = khz / KHZ_PER_MHZ
        temps = {}
        for zone in self._zones:
            milli = _number(zone / "temp")
            if milli is not None:
                kind = (zone / "type").read_text().strip() if (zone / "type").is_file() else zone.name
                temps[kind if kind not in temps else f"{kind}:{zone.name}"] = milli / MILLIDEGREES_PER_C
        return TelemetrySample(cpu_freq_mhz=freq, temperatures_c=temps, energy_uj=self._energy.read_uj())
