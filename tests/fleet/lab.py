"""A simulated lab for the fleet tests: three Ray nodes on loopback, each with a `farm agent`
serving 34 simulated units (and its host unit), and `farm serve` on the head (docs/fleet.md,
"Simulated lab"). Each test module that asks for the `lab` fixture (tests/fleet/conftest.py)
gets one of its own."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import psutil
from onnx import TensorProto, helper

from tests.fleet.cluster import LocalCluster, Node

ROOT = Path(__file__).resolve().parents[2]
NODES = (("n1", "127.0.0.1"), ("n2", "127.0.0.2"), ("n3", "127.0.0.3"))
UNITS_PER_NODE = 34
JOB_S = 0.3
#: Ray titles an actor's worker process `ray::<class>` (`ray::<class>.<method>` while it runs one)
ACTOR_TITLE = "ray::DeviceActorImpl"


@dataclass
class Lab:
    cluster: LocalCluster
    home: Path
    nodes: dict[str, Node]
    probe: subprocess.Popen[str]
    #: each node's `farm agent` process
    agents: dict[str, subprocess.Popen[bytes]]

    def units(self) -> list[dict[str, Any]]:
        from tests.fleet.conftest import probe_units  # conftest makes the lab: imported late

        return probe_units(self.probe)

    def held(self) -> dict[str, int]:
        """What the fleet holds of units' results, now and at most so far (controller/job_writer.py)."""
        from tests.fleet.conftest import ask_probe

        result: dict[str, int] = ask_probe(self.probe, "held")
        return result

    def farm(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        try:
            return self.cluster.farm(
                "--home", str(self.home), *args, timeout_s=timeout_s, env={"FARM_SIMULATED_DEVICES": "1"}
            )
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
            raise AssertionError(f"farm {args[0]} ran past {timeout_s}s:\n{(stderr or '')[-3000:]}") from None


def lab_env(root: Path, name: str) -> dict[str, str]:
    return {
        "FARM_HOME": str(root / f"home-{name}"),
        "FARM_AGENT_HOST_SERIAL": name,
        "FARM_SIMULATED_DEVICES": str(UNITS_PER_NODE),
        "FARM_AGENT_SIMULATED_PREFIX": name,
        "FARM_AGENT_SIMULATED_JOB_S": str(JOB_S),
        "FARM_AGENT_SIMULATED_JOB_SPREAD": "0.2",
    }


def device_actor_pids(node: Node) -> list[int]:
    pids = []
    for child in psutil.Process(node.process.pid).children(recursive=True):
        try:
            title = " ".join(child.cmdline())
        except psutil.NoSuchProcess:
            continue
        if title.startswith(ACTOR_TITLE):
            pids.append(child.pid)
    return pids


def device_actor_processes(node: Node) -> int:
    return len(device_actor_pids(node))


def write_model(path: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "lab", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def simulated_units(lab: Lab) -> set[str]:
    return {u["name"].split(":", 1)[1] for u in lab.units() if u["name"].startswith("simulated:")}
