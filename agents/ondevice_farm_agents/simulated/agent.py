"""Simulated units, for load-testing the farm: a job waits for a drawn time, then returns a
realistic result (samples, a per-op profile, outputs, load and first-inference times).

Never discovered unless asked for: the CLI sets `simulated_units` only from
`FARM_SIMULATED_DEVICES` (or `FARM_AGENT_SIMULATED_UNITS`). Every figure is synthetic by
construction and says so (`latency_source`, `placement_source`, each op's `source`: "synthetic"),
so the analysis, metrics and baselines keep it apart from measured ones. Only the job's execution
is simulated: the controller, queue, store, metrics, nightly and reports are the real ones.

One agent serves many units at once (`farm agent` runs all of a node's simulated units in one
threaded `DeviceActor`), so `run` keeps no per-unit state outside `self.cancellation`.

Timing (settings: `ondevice_farm_agents.simulated.settings`): with `simulated_job_s` a job lasts a
log-normal draw around it (a lab's job length, whatever the request asks); without, it lasts as
long as its drawn inferences (load, first inference, warm-up and timed runs), as before.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import numpy as np

from ondevice_farm.errors import DeviceLostError
from ondevice_farm_agents.base import AgentSettings, DeviceAgent, DeviceRun, DeviceUnit, Health, RunRequest
from ondevice_farm_agents.simulated.op_profile import add_profile, synthetic_graph
from ondevice_farm_agents.simulated.outputs import OutputSource
from ondevice_farm_agents.simulated.settings import SimulatedSettings, simulated_settings

PLATFORM = "simulated"
PROFILE = "simulated"
#: how often a running job checks whether its unit was unplugged (only with `simulated_unplugged`;
#: a cancel wakes it at once)
POLL_S = 0.02
#: a target's inferences relative to ort/cpu's (an accelerator is faster than the CPU)
TARGET_SPEED = {"cpu": 1.0, "xnnpack": 0.7, "nnapi": 0.45, "qnn": 0.35}
#: load and first inference, in inference times
LOAD_INFERENCES = 5.0
FIRST_INFERENCES = 2.0


class SimulatedAgent(DeviceAgent):
    platform = PLATFORM

    def __init__(self, settings: AgentSettings) -> None:
        super().__init__(settings)
        self.config: SimulatedSettings = simulated_settings(settings.extra, socket.gethostname())
        self._outputs = OutputSource(self.config.outputs)

    def _unplugged(self) -> set[str]:
        path = self.config.unplugged
        if not path or not Path(path).exists():
            return set()
        return {line.strip() for line in Path(path).read_text().splitlines() if line.strip()}

    def _slowdown(self, serial: str) -> float:
        spec = self.config.slow
        if spec.startswith("@"):
            path = Path(spec[1:])
            spec = path.read_text() if path.exists() else ""
        for part in spec.replace("\n", ",").split(","):
            name, _, factor = part.partition("=")
            if name.strip() == serial:
                return float(factor)
        return 1.0

    def discover(self) -> list[DeviceUnit]:
        prefix = self.config.prefix
        unplugged = self._unplugged()
        return [
            DeviceUnit(
                profile=PROFILE, serial=f"{prefix}-{i}", platform=PLATFORM, properties={"simulated": "1"}
            )
            for i in range(self.config.units)
            if f"{prefix}-{i}" not in unplugged
        ]

    def prepare(self, unit: DeviceUnit, request: RunRequest) -> None:
        self._check(unit)

    def health(self, unit: DeviceUnit) -> Health:
        return Health(up=unit.serial not in self._unplugged())

    def _check(self, unit: DeviceUnit) -> None:
        if unit.serial in self._unplugged():
            raise DeviceLostError(f"{unit.name}: the unit was unplugged")

    def _wait(self, unit: DeviceUnit, seconds: float) -> None:
        """Sleep `seconds` like a busy unit: a cancel ends it at once, an unplug at the next poll."""
        woken = threading.Event()
        poll_s = POLL_S if self.config.unplugged else None
        deadline = time.monotonic() + seconds
        with self.cancellation.stoppable(unit.serial, woken.set):
            while (left := deadline - time.monotonic()) > 0 and not woken.is_set():
                if poll_s is not None:
                    self._check(unit)
                woken.wait(left if poll_s is None else min(poll_s, left))
        self.cancellation.check(unit.serial)
        self._check(unit)

    def _inference_ms(self, unit: DeviceUnit, request: RunRequest) -> float:
        return (
            self.config.latency_ms
            * TARGET_SPEED.get(request.target.backend, 1.0)
            * self._slowdown(unit.serial)
        )

    def _samples(self, median_ms: float, count: int, rng: np.random.Generator) -> list[float]:
        return [float(v) for v in median_ms * rng.lognormal(0.0, self.config.jitter, size=count)]

    def run(self, unit: DeviceUnit, request: RunRequest) -> DeviceRun:
        rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
        median = self._inference_ms(unit, request)
        draws = self._samples(median, request.warmup + request.runs + 2, rng)
        load_ms, first_ms = draws[0] * LOAD_INFERENCES, draws[1] * FIRST_INFERENCES
        samples = draws[2 + request.warmup :]
        if self.config.job_s is not None:
            wall_s = self.config.job_s * float(rng.lognormal(0.0, self.config.job_spread))
        else:
            wall_s = (load_ms + first_ms + sum(draws[2:])) / 1000
        self._wait(unit, wall_s)
        run = DeviceRun(
            load_ms=load_ms,
            first_inference_ms=first_ms,
            samples_ms=samples,
            outputs=self._outputs.outputs(request, rng),
            runner="simulated",
            notes=["simulated unit: synthetic timings, profile and outputs"],
            latency_source="synthetic",
            placement_source="synthetic",
            warm_load_ms=load_ms * 0.4,
            warm_load_method="simulated",
        )
        if request.profile_ops and self.config.ops:
            graph = synthetic_graph(request.artifact_sha256, request.target, self.config.ops)
            add_profile(run, graph, median, request.runs, self.config.jitter, rng)
        return run

    def measure_session(self, unit: DeviceUnit, request: RunRequest) -> list[float]:
        """A further session: with `simulated_job_s` the job's drawn time already covers every
        session, so it only draws samples; without, it lasts as long as its inferences."""
        if self.config.job_s is None:
            return super().measure_session(unit, request)
        self.cancellation.check(unit.serial)
        rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
        return self._samples(self._inference_ms(unit, request), request.runs, rng)
