"""Fixtures for the metrics tests: a store with real host-cpu results, the real fleet of this
host, and real Prometheus / Pushgateway servers on loopback, always stopped."""

from __future__ import annotations

import copy
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ondevice_farm.metrics.fleet_state import FleetSnapshot, UnitState
from ondevice_farm.profiles import DEFAULT_PROFILES_DIR, load_profiles
from ondevice_farm.store import ResultsStore, new_run_id
from ondevice_farm_agents.base import AgentSettings
from ondevice_farm_agents.host.agent import HostAgent

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_MODEL = REPO / "examples" / "tinynet.onnx"
DEPLOY = REPO / "deploy"
SUITE = "smoke"
SERVER_START_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class RealRun:
    """A `farm submit` that ran for real on this host, and the store it left."""

    home: Path
    document: dict[str, Any]

    @property
    def store_path(self) -> Path:
        return self.home / "results.sqlite"

    @property
    def job(self) -> dict[str, Any]:
        (job,) = self.document["jobs"]
        return dict(job)


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> RealRun:
    """tinynet on host-cpu through the real pipeline (embedded Ray, ONNX Runtime, the store)."""
    home = tmp_path_factory.mktemp("farm-home")
    model = home / "tinynet.onnx"
    shutil.copy(EXAMPLE_MODEL, model)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ondevice_farm",
            "--home",
            str(home),
            "submit",
            str(model),
            "--devices",
            "host-cpu",
            "--runs",
            "5",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return RealRun(home=home, document=json.loads(done.stdout))


def file_as_nightly(store: ResultsStore, job: dict[str, Any], suite: str = SUITE) -> str:
    """Store a measured job again under a complete nightly run of `suite` (the store API a
    nightly uses: start_run, add_job, finish_run); returns the run id."""
    run_id = new_run_id()
    store.start_run(run_id, "nightly", {"suite": suite}, suite=suite)
    refiled = copy.deepcopy(job)
    refiled.update(job_id=f"{run_id}-{job['job_id'][-6:]}", run_id=run_id)
    store.add_job(run_id, refiled)
    store.finish_run(run_id, "complete")
    return run_id


class HostFleet:
    """The FleetStateSource a controller would be, over this host's real units and health checks."""

    def __init__(self) -> None:
        self._agent = HostAgent(AgentSettings(profiles=load_profiles(DEFAULT_PROFILES_DIR)))
        self._units = self._agent.discover()
        self.queue_jobs = 0

    def snapshot(self) -> FleetSnapshot:
        states = []
        for unit in self._units:
            health = self._agent.health(unit)
            temperatures = health.thermal.temperatures_c if health.thermal else {}
            states.append(
                UnitState(
                    unit.profile,
                    unit.serial,
                    up=health.up,
                    busy=False,
                    temperature_c=max(temperatures.values(), default=None),
                )
            )
        return FleetSnapshot(devices=tuple(states), queue_jobs=self.queue_jobs)

    def close(self) -> None:
        self._agent.close()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get(url: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())


def wait_until_ready(
    url: str, process: subprocess.Popen[bytes], timeout_s: float = SERVER_START_TIMEOUT_S
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{process.args!r} exited with {process.returncode}")
        try:
            if http_get(url, timeout_s=1.0)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} not ready after {timeout_s} s")


def binary(name: str, package: str) -> str:
    """The path of a server binary from a Debian package, or a skip that says how to get it."""
    path = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/sbin")
    if path is None:
        pytest.skip(f"{name} is not installed: apt-get install {package} (scripts/test does)")
    return path
