"""Fixtures for the metrics tests: a store with real host-cpu results, the real fleet of this
host, and real Prometheus / Pushgateway servers on loopback, always stopped."""

from __future__ import annotations

import copy
import json
import os
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
from tests.scripted_rapl import RaplScript, ScriptedRapl, process_tree
from tests.scripted_warming import Ramp, ScriptedRamp

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_MODEL = REPO / "examples" / "tinynet.onnx"
DEPLOY = REPO / "deploy"
SUITE = "smoke"
SERVER_START_TIMEOUT_S = 20.0
#: a short sustained phase after the timed runs, so the sustained panels have windows to show
SUSTAINED_S, SUSTAINED_WINDOW_S = "1.2s", "0.3"
#: the job's RAPL package counter, scripted (synthetic levels, no recording): idle and loaded
#: package power, following the CPU the `farm submit` and its Ray cluster use (tests/scripted_rapl.py)
RAPL_SCRIPT = RaplScript(idle_w=5.0, load_w=15.0, update_ms=25.0)
#: short energy windows: the fixture's job pays them once (about 1.3 s)
HOST_ENERGY = {
    "FARM_AGENT_HOST_ENERGY_IDLE_S": "0.5",
    "FARM_AGENT_HOST_ENERGY_MIN_ACTIVE_S": "0.5",
    "FARM_AGENT_HOST_ENERGY_SETTLE_S": "0.3",
}
#: recorded `dumpsys thermalservice` of a Pixel-class phone (provenance: tests/android/fixtures/README.md)
RECORDED_THERMAL = REPO / "tests/android/fixtures/dumpsys/thermalservice_pixel_memfault.txt"
#: the hottest recorded zone warms while the job runs (synthetic, tests/scripted_warming.py), so each
#: sustained window reads a temperature of its own, rising in window order (0.06 °C apart, 0.3 s
#: windows; slow enough not to reach its end before the job does on a loaded machine)
WARMING_C_PER_S = 0.2
WARMING_SPAN_C = 60.0


def telemetry_tree(root: Path) -> Path:
    """A sysfs tree for the host's telemetry reader (`host_telemetry_root`): this VM exposes no
    thermal zones and no RAPL, so the run reads these instead. The zones carry the temperatures a
    real Pixel's thermal HAL reported (the recording above, through the farm's own parser), the
    hottest of them warming from there while the job runs (`warming_zone`); the RAPL counter is
    `real_run`'s scripted one (`RAPL_SCRIPT`)."""
    from ondevice_farm_agents.android.thermal import parse_thermalservice

    recorded = parse_thermalservice(RECORDED_THERMAL.read_text()).temperatures_c
    for index, (sensor, celsius) in enumerate(sorted(recorded.items())):
        zone = root / f"sys/class/thermal/thermal_zone{index}"
        zone.mkdir(parents=True)
        (zone / "type").write_text(f"{sensor}\n")
        (zone / "temp").write_text(f"{round(celsius * 1000)}\n")
    return root


def warming_zone(root: Path) -> ScriptedRamp:
    """The hottest zone of `telemetry_tree`, warming at WARMING_C_PER_S from its recorded value."""
    zones = [(float((z / "temp").read_text()) / 1000, z) for z in (root / "sys/class/thermal").iterdir()]
    celsius, zone = max(zones)
    return ScriptedRamp(zone / "temp", Ramp(celsius, celsius + WARMING_SPAN_C, WARMING_C_PER_S), scale=1000)


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
    """tinynet on host-cpu through the real pipeline (embedded Ray, ONNX Runtime, the store),
    with a short sustained phase whose telemetry comes from `telemetry_tree`, and energy per
    inference from its scripted RAPL counter."""
    home = tmp_path_factory.mktemp("farm-home")
    tree = telemetry_tree(tmp_path_factory.mktemp("telemetry"))
    model = home / "tinynet.onnx"
    shutil.copy(EXAMPLE_MODEL, model)
    submit = subprocess.Popen(
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
            "--sustained",
            SUSTAINED_S,
            "--sustained-window",
            SUSTAINED_WINDOW_S,
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **HOST_ENERGY, "FARM_AGENT_HOST_TELEMETRY_ROOT": str(tree)},
    )
    with ScriptedRapl(tree, RAPL_SCRIPT, process_tree(submit.pid)), warming_zone(tree):
        try:
            stdout, stderr = submit.communicate(timeout=180)
        finally:
            if submit.poll() is None:
                submit.kill()
                submit.communicate()
    assert submit.returncode == 0, stderr
    return RealRun(home=home, document=json.loads(stdout))


@pytest.fixture(scope="session")
def generation_run(tmp_path_factory: pytest.TempPathFactory) -> RealRun:
    """A generation job (docs/generate.md) on a tiny Llama built here, through the real pipeline:
    what the generation gauges and panels show."""
    from tests.generate.tiny_llama import build_tiny_llama

    folder = build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    home = tmp_path_factory.mktemp("farm-home-generation")
    done = subprocess.run(
        [sys.executable, "-m", "ondevice_farm", "--home", str(home), "submit", str(folder),
         "--generate", "prompt=16,decode=8,reps=2", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
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
