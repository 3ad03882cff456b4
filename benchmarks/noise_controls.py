"""Between-session spread on this host with and without the farm's noise controls.

For each model, fresh host sessions (agents/ondevice_farm_agents/host/session.py, a process each, as `farm
submit
--repeats` and `farm compare` run them) under each setting, the settings taken in turn within
every round so that drift of the machine is shared between them. Printed per setting:
- session spread: the standard deviation of log(session p50) over the rounds (what history has
  to see through);
- paired spread: the standard deviation of log(p50 of one session / p50 of the next session of
  the same setting in the same round), which is what `farm compare`'s A/A rounds see.

    python benchmarks/noise_controls.py [--rounds 12] [--runs 50] [MODEL.onnx ...]
      (default: examples/tinynet.onnx and, where present, ../shared/models/mobilenet_v2.onnx)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ondevice_farm.inputs import (
    resolve_shapes,
    seeded_inputs,
)
from ondevice_farm.model import inspect_model
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, RunRequest
from ondevice_farm_agents.host.agent import HostAgent

REPO = Path(__file__).resolve().parents[1]

LAST_CPU = (max(os.sched_getaffinity(0)),)
#: name -> (threads, cores, spinning)
SETTINGS: dict[str, tuple[int | None, tuple[int, ...] | None, bool | None]] = {
    "uncontrolled (default threads)": (None, None, None),
    "default threads, spinning off": (None, None, False),
    "1 thread": (1, None, None),
    "1 thread, pinned": (1, LAST_CPU, None),
    "1 thread, pinned, spinning off": (1, LAST_CPU, False),
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    models = args.models or [
        p
        for p in (REPO / "examples/tinynet.onnx", REPO.parent / "shared/models/mobilenet_v2.onnx")
        if p.exists()
    ]
    agent = HostAgent(AgentSettings())
    [unit] = [u for u in agent.discover() if u.profile == "host-cpu"]
    print(f"load average at start: {os.getloadavg()[0]:.2f}; CPUs {sorted(os.sched_getaffinity(0))}")
    for model in models:
        info = inspect_model(model)
        inputs = seeded_inputs(info, resolve_shapes(info, {}), 0)
        p50s: dict[str, list[tuple[float, float]]] = {name: [] for name in SETTINGS}
        started = time.monotonic()
        for _ in range(args.rounds):
            for name, (threads, cores, spinning) in SETTINGS.items():
                request = RunRequest(
                    artifact=model,
                    artifact_sha256="-",
                    target=Target.parse("ort/cpu"),
                    inputs=inputs,
                    warmup=5,
                    runs=args.runs,
                    intra_op_threads=threads,
                    cpu_affinity=cores,
                    allow_spinning=spinning,
                    profile_ops=False,
                )
                first = float(np.percentile(agent.measure_session(unit, request), 50))
                second = float(np.percentile(agent.measure_session(unit, request), 50))
                p50s[name].append((first, second))
        print(
            f"\n{model.name}: {args.rounds} rounds x 2 sessions per setting, {args.runs} timed runs each "
            f"({time.monotonic() - started:.0f} s; load average now {os.getloadavg()[0]:.2f})"
        )
        print(f"{'setting':<34} {'p50 ms':>8} {'session spread':>15} {'paired spread':>14}")
        for name, pairs in p50s.items():
            logs = [math.log(a) for a, _ in pairs] + [math.log(b) for _, b in pairs]
            ratios = [math.log(b / a) for a, b in pairs]
            print(
                f"{name:<34} {math.exp(statistics.mean(logs)):>8.3f} {statistics.stdev(logs) * 100:>14.1f}% "
                f"{statistics.stdev(ratios) * 100:>13.1f}%"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
