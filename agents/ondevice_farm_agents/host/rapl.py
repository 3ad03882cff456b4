"""This host's RAPL package energy counters (`/sys/class/powercap/intel-rapl:N/energy_uj`).

The kernel's powercap driver exposes one cumulative counter per CPU package (µJ, wrapping at
`max_energy_range_uj`); its subdomains (cores, uncore, dram: `intel-rapl:N:M`) are counted inside
the package, so only the packages are summed. AMD Zen processors appear under the same driver.
Since Linux 5.10 `energy_uj` is readable by root only (CVE-2020-8694), so a counter that exists
may still be closed to the agent; a virtual machine usually has no powercap at all.
"""

from __future__ import annotations

from pathlib import Path

POWERCAP = "sys/class/powercap"
#: package-level domains only: intel-rapl:0, intel-rapl:1, ...
PACKAGE_GLOB = "intel-rapl:[0-9]"


def _read_uj(path: Path) -> float:
    """The counter's value; OSError or ValueError where it cannot be read."""
    return float(path.read_text().strip())


class RaplCounter:
    """The package counters under `root`, summed: energy since the first read, across wraps."""

    def __init__(self, root: Path = Path("/")) -> None:
        self.powercap = root / POWERCAP
        self.domains = sorted(self.powercap.glob(PACKAGE_GLOB))
        self._wrap_uj: dict[Path, float | None] = {}
        for domain in self.domains:
            try:
                self._wrap_uj[domain] = _read_uj(domain / "max_energy_range_uj")
            except (OSError, ValueError):
                self._wrap_uj[domain] = None
        self._last_uj: dict[Path, float] = {}
        self._total_uj = 0.0

    def absence(self) -> str:
        """Why the counters cannot be read here; "" where they can."""
        if not self.domains:
            return (
                f"no RAPL package counter ({PACKAGE_GLOB.replace('[0-9]', 'N')}) under {self.powercap}: "
                "a virtual machine, or a CPU or kernel without the powercap RAPL driver"
            )
        for domain in self.domains:
            path = domain / "energy_uj"
            try:
                _read_uj(path)
            except PermissionError:
                return (
                    f"{path} is not readable by this user (root-only since Linux 5.10, CVE-2020-8694): "
                    "run the agent as root or grant it read access (e.g. a udev rule or chmod o+r)"
                )
            except (OSError, ValueError) as exc:
                return f"{path} cannot be read ({type(exc).__name__}: {exc})"
        return ""

    def describe(self) -> str:
        """What is read, for a method line, e.g. "RAPL package-0 energy counter (/sys/.../energy_uj)"."""
        names = []
        for domain in self.domains:
            try:
                names.append((domain / "name").read_text().strip() or domain.name)
            except OSError:
                names.append(domain.name)
        paths = ", ".join(str(d / "energy_uj") for d in self.domains)
        plural = "s" if len(self.domains) > 1 else ""
        return f"RAPL {' + '.join(names)} energy counter{plural} ({paths})"

    def read_uj(self) -> float | None:
        """Energy since the first read (µJ), summed over packages; None if any counter failed."""
        readings: dict[Path, float] = {}
        for domain in self.domains:
            try:
                readings[domain] = _read_uj(domain / "energy_uj")
            except (OSError, ValueError):
                return None
        if not readings:
            return None
        for domain, value in readings.items():
            previous = self._last_uj.get(domain)
            if previous is not None:
                delta = value - previous
                wrap = self._wrap_uj.get(domain)
                if delta < 0 and wrap:
                    delta += wrap
                self._total_uj += max(0.0, delta)
            self._last_uj[domain] = value
        return self._total_uj
