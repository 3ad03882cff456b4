"""Simulated units, for load-testing the scheduler only: a job sleeps for as long as its
inferences would take, drawn from a configured distribution.

Never discovered unless asked for: the CLI sets `simulated_units` only from
`FARM_SIMULATED_DEVICES` (or `FARM_AGENT_SIMULATED_UNITS`). Its numbers are synthetic by
construction and every job says so in its notes; nothing else in the farm uses this agent.

Settings (`AgentSettings.extra`, `FARM_AGENT_<NAME>` at the CLI):
    simulated_units       how many units this host has (default 0: none)
    simulated_prefix      serial prefix (default: the hostname); serials are PREFIX-0, PREFIX-1, ...
    simulated_latency_ms  median time of one inference (default 2.0)
    simulated_jitter      sigma of the log-normal spread around it (default 0.05)
    simulated_slow        SERIAL=FACTOR,...: units whose inferences take FACTOR times longer
                          (`@PATH`: read that list from a file at every job)
    simulated_unplugged   a file listing unplugged serials, one per line: they vanish from
                          discovery, and a job running on one fails with DeviceLostError
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import numpy as np

from ondevice_farm.errors import DeviceLostError, UsageError
from ondevice_farm_agents.base import DeviceAgent, DeviceRun, DeviceUnit, Health, RunRequest

PLATFORM = "simulated"
PROFILE = "simulated"
DEFAULT_LATENCY_MS = 2.0
DEFAULT_JITTER = 0.05
#: how often a running job checks whether its unit was unplugged
POLL_S = 0.02


class SimulatedAgent(DeviceAgent):
    platform = PLATFORM

    def _setting(self, name: str, default: str) -> str:
        return self.settings.extra.get(name, default)

    def _float(self, name: str, default: float) -> float:
        text = self._setting(name, str(default))
        try:
            return float(text)
        except ValueError:
            raise UsageError(f"{name}={text!r} is not a number") from None

    def _unplugged(self) -> set[str]:
        path = self._setting("simulated_unplugged", "")
        if not path or not Path(path).exists():
            return set()
        return {line.strip() for line in Path(path).read_text().splitlines() if line.strip()}

    def _slowdown(self, serial: str) -> float:
        spec = self._setting("simulated_slow", "")
        if spec.startswith("@"):
            path = Path(spec[1:])
            spec = path.read_text() if path.exists() else ""
        for part in spec.replace("\n", ",").split(","):
            name, _, factor = part.partition("=")
            if name.strip() == serial:
                return float(factor)
        return 1.0

    def discover(self) -> list[DeviceUnit]:
        count = int(self._float("simulated_units", 0))
        prefix = self._setting("simulated_prefix", socket.gethostname())
        unplugged = self._unplugged()
        return [
            DeviceUnit(
                profile=PROFILE, serial=f"{prefix}-{i}", platform=PLATFORM, properties={"simulated": "1"}
            )
            for i in range(count)
            if f"{prefix}-{i}" not in unplugged
        ]

    def prepare(self, unit: DeviceUnit, request: RunRequest) -> None:
        self._check(unit)

    def health(self, unit: DeviceUnit) -> Health:
        return Health(up=unit.serial not in self._unplugged())

    def _check(self, unit: DeviceUnit) -> None:
        if unit.serial in self._unplugged():
            raise DeviceLostError(f"{unit.name}: the unit was unplugged")

    def run(self, unit: DeviceUnit, request: RunRequest) -> DeviceRun:
        median = self._float("simulated_latency_ms", DEFAULT_LATENCY_MS) * self._slowdown(unit.serial)
        jitter = self._float("simulated_jitter", DEFAULT_JITTER)
        rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
        draws = median * rng.lognormal(0.0, jitter, size=request.warmup + request.runs + 2)
        load_ms, first_ms = float(draws[0]) * 5, float(draws[1]) * 2
        samples = [float(v) for v in draws[2 + request.warmup :]]
        deadline = time.monotonic() + (load_ms + first_ms + float(draws[2:].sum())) / 1000
        while (left := deadline - time.monotonic()) > 0:
            self._check(unit)
            self.cancellation.check(unit.serial)
            time.sleep(min(POLL_S, left))
        self._check(unit)
        return DeviceRun(
            load_ms=load_ms,
            first_inference_ms=first_ms,
            samples_ms=samples,
            outputs={},
            runner="simulated",
            notes=["simulated unit: synthetic timings, no outputs"],
            latency_source="synthetic",
            placement_source="synthetic",
        )
