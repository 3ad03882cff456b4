"""One real Ray cluster per test module: a head running `farm serve`, and two worker nodes,
each running `farm agent` with its own host-cpu unit and two simulated units."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

from tests.fleet.cluster import VENV_BIN, LocalCluster, Node, new_cluster
from tests.fleet.lab import NODES, UNITS_PER_NODE, Lab, lab_env

WORKERS = (("n2", "127.0.0.2"), ("n3", "127.0.0.3"))
SIMULATED_PER_NODE = 2
SIMULATED_LATENCY_MS = 2.0


def only_loopback() -> bool:
    return all(name == "lo" for _, name in socket.if_nameindex())


@dataclass
class Fleet:
    cluster: LocalCluster
    home: Path
    workers: dict[str, Node]
    agents: dict[str, Any]
    unplugged: Path
    slow: Path
    #: a driver process of the cluster that answers "units" with the fleet's units as JSON ("held":
    #: the results it holds); the test process itself stays out of Ray (other test modules may
    #: hold an embedded Ray of their own)
    probe: subprocess.Popen[str]
    serves: list[subprocess.Popen[bytes]]

    @property
    def serve(self) -> subprocess.Popen[bytes]:
        return self.serves[-1]

    def metrics_url(self) -> str:
        """The running controller's /metrics, as `farm serve` announced it."""
        return self._announced(r"metrics on (http://\S+/metrics)", "its /metrics")

    def api_url(self) -> str:
        """The running controller's submit API, as `farm serve` announced it."""
        return self._announced(r"submit API on (http://\S+?):? ", "its submit API")

    def _announced(self, pattern: str, what: str) -> str:
        found: list[str] = []

        def announced() -> bool:
            found[:] = re.findall(pattern, self.cluster.log("serve"))
            return bool(found)

        wait_for(announced, 30, f"farm serve to announce {what}")
        return found[-1]

    def restart_serve(self) -> None:
        """A new controller: it adopts the running fleet (detached, controller/fleet_owner.py), or
        starts one, with which the agents register their units again within a second."""
        self.serves.append(start_serve(self.cluster, self.home))
        expected = len(WORKERS) * (1 + SIMULATED_PER_NODE)
        wait_for(
            lambda: sum(1 for u in self.units() if u["up"]) == expected, 60, "units on the new controller"
        )

    def farm(self, *args: str, timeout_s: float = 120) -> Any:
        return self.cluster.farm(
            "--home", str(self.home), *args, timeout_s=timeout_s, env={"FARM_SIMULATED_DEVICES": "1"}
        )

    def units(self) -> list[dict[str, Any]]:
        """Each unit the fleet knows: name, serial, up, busy."""
        return probe_units(self.probe)


PROBE = """
import json, sys
import ray
ray.init(address=sys.argv[1], namespace="farm", log_to_driver=False, logging_level="ERROR")
from ondevice_farm.controller.node_agent import find_fleet
for line in sys.stdin:
    try:
        if line.strip() == "held":  # what the fleet holds of units' results (job_writer.py)
            print("HELD " + json.dumps(ray.get(find_fleet().held_results.remote(), timeout=30)), flush=True)
            continue
        units = ray.get(find_fleet().units.remote(), timeout=30)
        out = [{"name": u["unit"].name, "serial": u["unit"].serial, "up": u["up"], "busy": u["busy"]}
               for u in units]
    except Exception as exc:
        out = {"error": repr(exc)}
    print("UNITS " + json.dumps(out), flush=True)
"""


def ask_probe(probe: subprocess.Popen[str], command: str) -> Any:
    """The PROBE driver's JSON answer to `command` ("units" or "held")."""
    assert probe.stdin is not None and probe.stdout is not None
    probe.stdin.write(command + "\n")
    probe.stdin.flush()
    prefix = command.upper() + " "
    line = ""
    while not line.startswith(prefix):  # Ray's driver prints cluster events on stdout too
        line = probe.stdout.readline()
        if not line:
            raise RuntimeError("the fleet probe exited")
    return json.loads(line[len(prefix) :])


def probe_units(probe: subprocess.Popen[str]) -> list[dict[str, Any]]:
    result = ask_probe(probe, "units")
    return result if isinstance(result, list) else []  # no controller right now


def start_probe(cluster: LocalCluster) -> subprocess.Popen[str]:
    """The PROBE driver on `cluster`, stopped with it."""
    probe = subprocess.Popen(
        [sys.executable, "-c", PROBE, cluster.address],
        env=cluster.env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    cluster.processes.append(probe)  # type: ignore[arg-type]
    return probe


def agent_env(root: Path, name: str) -> dict[str, str]:
    return {
        "FARM_HOME": str(root / f"home-{name}"),
        "FARM_AGENT_HOST_SERIAL": name,
        "FARM_SIMULATED_DEVICES": str(SIMULATED_PER_NODE),
        "FARM_AGENT_SIMULATED_PREFIX": name,
        "FARM_AGENT_SIMULATED_LATENCY_MS": str(SIMULATED_LATENCY_MS),
        "FARM_AGENT_SIMULATED_UNPLUGGED": str(root / "unplugged"),
        "FARM_AGENT_SIMULATED_SLOW": f"@{root / 'slow'}",
    }


def start_serve(cluster: LocalCluster, home: Path) -> subprocess.Popen[bytes]:
    farm = str(VENV_BIN / "farm")
    return cluster.spawn(
        "serve",
        [
            farm,
            "--home",
            str(home),
            "serve",
            "--address",
            cluster.address,
            "--submitter-timeout",
            "4",
            "--metrics-port",
            "0",
            "--api-port",  # a restarted controller must not wait for the old one's port
            "0",
        ],
    )


def wait_for(predicate: Any, timeout_s: float, what: str, interval_s: float = 0.2) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    cluster = new_cluster()
    try:
        cluster.start_head()
        workers = {name: cluster.add_node(name, ip) for name, ip in WORKERS}
        cluster.wait_nodes(1 + len(workers))
        home = cluster.root / "home"
        farm = str(VENV_BIN / "farm")
        serve = start_serve(cluster, home)
        agents = {
            name: cluster.spawn(
                f"agent-{name}",
                [farm, "agent", "--address", cluster.address, "--node-ip", ip, "--rediscover", "1"],
                env=agent_env(cluster.root, name),
            )
            for name, ip in WORKERS
        }
        probe = start_probe(cluster)
        state = Fleet(
            cluster, home, workers, agents, cluster.root / "unplugged", cluster.root / "slow", probe, [serve]
        )
        expected = len(WORKERS) * (1 + SIMULATED_PER_NODE)

        def all_up() -> bool:
            return sum(1 for u in state.units() if u["up"]) == expected

        wait_for(all_up, 90, f"{expected} units registered")
        for node in workers.values():
            node.remember_descendants()
        yield state
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Relu then Sigmoid: small enough that a host-cpu job takes milliseconds."""
    path = tmp_path_factory.mktemp("models") / "tiny.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Sigmoid", ["h"], ["y"])], "tiny", [x], [y]
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    cluster = new_cluster()
    try:
        cluster.start_head()
        nodes = {"n1": cluster.nodes[0]}
        nodes.update({name: cluster.add_node(name, ip) for name, ip in NODES[1:]})
        cluster.wait_nodes(len(NODES))
        home = cluster.root / "home"
        start_serve(cluster, home)
        agents = {
            name: cluster.spawn(
                f"agent-{name}",
                [str(VENV_BIN / "farm"), "agent", "--address", cluster.address, "--node-ip", ip],
                env=lab_env(cluster.root, name),
            )
            for name, ip in NODES
        }
        probe = start_probe(cluster)
        state = Lab(cluster, home, nodes, probe, agents)
        expected = len(NODES) * (1 + UNITS_PER_NODE)
        wait_for(lambda: sum(1 for u in state.units() if u["up"]) == expected, 120, f"{expected} units up")
        yield state
    finally:
        cluster.stop()
