"""Energy per inference on the host, from the RAPL package counters (docs/results.md, "Energy").

After the warm-up, a thread reads the counters every `sample_ms` through a settle pause (ONNX
Runtime's intra-op workers keep spinning a few hundred ms after a run), an idle window (the
baseline) and the timed runs; untimed inferences follow the timed ones until the loaded window
lasts `min_active_s`. `ondevice_farm.analysis.energy.counter_energy_estimate` turns the readings
into energy per inference, the same arithmetic Android and iOS jobs get. Where no counter can be
read (a VM; a kernel that keeps `energy_uj` root-only) the job gets the reason at once, with no
idle window, so hosts without RAPL pay nothing for it.

Settings (`AgentSettings.extra`, all optional; `FARM_AGENT_HOST_ENERGY_*` at the CLI):
`host_energy_idle_s` (0 turns energy off), `host_energy_min_active_s`, `host_energy_sample_ms`,
`host_energy_settle_s`; the counters are read under `host_telemetry_root`, like the sustained
phase's telemetry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ondevice_farm_agents.base import EnergyEstimate
from ondevice_farm_agents.extra import extra_number
from ondevice_farm_agents.host.rapl import RaplCounter

#: seconds of idle read before the timed runs (the baseline); short, as every host job pays it
DEFAULT_HOST_ENERGY_IDLE_S = 1.0
#: the timed runs are followed by untimed ones until the loaded window lasts this long
DEFAULT_HOST_ENERGY_MIN_ACTIVE_S = 1.0
#: RAPL updates about every millisecond; 20 ms gives 50 intervals a second for the spread
DEFAULT_HOST_ENERGY_SAMPLE_MS = 20.0
#: a pause after the warm-up, part of neither window, while ORT's spinning workers stop
DEFAULT_HOST_ENERGY_SETTLE_S = 0.5
MAX_HOST_ENERGY_S = 3600.0
MS_PER_S = 1000.0


@dataclass(frozen=True)
class HostEnergySettings:
    idle_s: float = DEFAULT_HOST_ENERGY_IDLE_S
    min_active_s: float = DEFAULT_HOST_ENERGY_MIN_ACTIVE_S
    sample_ms: float = DEFAULT_HOST_ENERGY_SAMPLE_MS
    settle_s: float = DEFAULT_HOST_ENERGY_SETTLE_S

    @classmethod
    def from_extra(cls, extra: dict[str, str]) -> HostEnergySettings:
        def number(key: str, default: float, least: float) -> float:
            return extra_number(extra, key, default, least, MAX_HOST_ENERGY_S)

        return cls(
            idle_s=number("host_energy_idle_s", DEFAULT_HOST_ENERGY_IDLE_S, 0.0),
            min_active_s=number("host_energy_min_active_s", DEFAULT_HOST_ENERGY_MIN_ACTIVE_S, 0.0),
            sample_ms=number("host_energy_sample_ms", DEFAULT_HOST_ENERGY_SAMPLE_MS, 1.0),
            settle_s=number("host_energy_settle_s", DEFAULT_HOST_ENERGY_SETTLE_S, 0.0),
        )

    @property
    def enabled(self) -> bool:
        return self.idle_s > 0


@dataclass
class _Readings:
    t_s: list[float] = field(default_factory=list)
    energy_uj: list[float] = field(default_factory=list)
    unreadable: int = 0


class HostEnergyMeter:
    """`with HostEnergyMeter(root, settings) as meter:` (the settle and idle windows, where a
    counter is readable), then the timed runs, then `meter.loaded(infer, runs)` for the estimate.
    Leaving the block, however, stops the reading thread."""

    def __init__(self, root: Path, settings: HostEnergySettings) -> None:
        self._settings = settings
        # energy off: no powercap walk on every host job (the counter is read only when enabled)
        self._counter = RaplCounter(root) if settings.enabled else None
        self._absent = self._counter.absence() if self._counter is not None else ""
        self._readings = _Readings()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._idle_s: tuple[float, float] = (0.0, 0.0)

    def __enter__(self) -> HostEnergyMeter:
        if self._settings.enabled and not self._absent:
            self._idle_window()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._halt()

    def _sample_loop(self, counter: RaplCounter) -> None:
        period_s = self._settings.sample_ms / MS_PER_S
        next_s = time.perf_counter()
        while True:
            at = time.perf_counter()
            value = counter.read_uj()
            if value is None:
                self._readings.unreadable += 1
            else:
                self._readings.t_s.append(at)
                self._readings.energy_uj.append(value)
            next_s += period_s
            if self._stop.wait(max(0.0, next_s - time.perf_counter())):
                return

    def _idle_window(self) -> None:
        assert self._counter is not None  # entered only when enabled
        self._thread = threading.Thread(
            target=self._sample_loop, args=(self._counter,), name="farm-rapl", daemon=True
        )
        self._thread.start()
        time.sleep(self._settings.settle_s)
        start = time.perf_counter()
        time.sleep(self._settings.idle_s)
        self._idle_s = (start, time.perf_counter())

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def loaded(self, infer: Callable[[], object], timed_runs: int) -> EnergyEstimate | None:
        """The estimate, after keeping the load on (untimed `infer`) to `min_active_s`; None when
        energy is turned off, `absent` with the reason where no counter could be read."""
        if not self._settings.enabled:
            return None
        if self._absent:
            return EnergyEstimate(absent=self._absent)
        inferences = timed_runs
        while time.perf_counter() - self._idle_s[1] < self._settings.min_active_s:
            infer()
            inferences += 1
        active_end_s = time.perf_counter()
        self._halt()
        return self._estimate(active_end_s, inferences)

    def _estimate(self, active_end_s: float, inferences: int) -> EnergyEstimate:
        from ondevice_farm.analysis.energy import counter_energy_estimate

        section = {
            "idle": {"start_s": self._idle_s[0], "end_s": self._idle_s[1]},
            "active": {"start_s": self._idle_s[1], "end_s": active_end_s, "inferences": inferences},
            "t_s": self._readings.t_s,
            "energy_uj": self._readings.energy_uj,
            "sample_period_ms": self._settings.sample_ms,
            "unreadable_samples": self._readings.unreadable,
        }
        assert self._counter is not None  # estimated only when enabled
        return counter_energy_estimate(section, self._counter.describe())
