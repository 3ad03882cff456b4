"""A CoreML job on an iPhone attached to an agent host of a two-node Ray cluster.

The head runs `farm serve` and the submitter; the worker node serves one iPhone (a fake phone at
pymobiledevice3's service boundary, FarmRunner played by the host stand-in, which runs the
compiled ML Program). The worker's Ray processes live in their own mount namespace in which the
head's FARM_HOME is an empty tmpfs: the `.mlpackage` exists only on the submitter's side, as on
two machines, and reaches the worker through Ray's object store as one archive, checked against
its tree hash and cached there. The model has PyTorch-style names, so the job also goes through
the I/O name map.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ondevice_farm.artifacts import sha256_path
from tests.fleet.cluster import LocalCluster, new_cluster
from tests.fleet.conftest import only_loopback, start_serve
from tests.ios.renamed_model import EXPECTED_OUTPUTS, write_renamed_model

pytestmark = pytest.mark.slow

#: a `farm agent` for one stand-in iPhone, on the worker node (`farm agent` proper finds real
#: phones over usbmuxd; this registers the same DeviceActor, built around the stand-in agent)
IOS_AGENT = """
import functools, sys, time
import ray
from ondevice_farm_agents.base import AgentSettings
from ondevice_farm_agents.ios.fakes import parse_ideviceinfo
from ondevice_farm_agents.ios.standin_app import standin_agent
from ondevice_farm.controller.actor import device_actor_class
from ondevice_farm.controller.cluster import ClusterConfig, ray_cluster
from ondevice_farm.controller.fleet import UnitEntry
from ondevice_farm.controller.node_agent import find_fleet, node_strategy
from ondevice_farm.profiles import load_profiles

address, node_ip, fixture, cache_dir = sys.argv[1:5]
settings = AgentSettings(profiles=load_profiles(), io_timeout_s=20.0,
                         extra={"ios_poll_s": "0.05", "ios_thermal_deadline_s": "5"})
factory = functools.partial(standin_agent, lockdown_values=parse_ideviceinfo(open(fixture).read()))
with ray_cluster(ClusterConfig(address=address, node_ip_address=node_ip)):
    node_id = ray.get_runtime_context().get_node_id()
    (unit,) = factory(settings).discover()
    actor = device_actor_class().options(scheduling_strategy=node_strategy(node_id)).remote(
        unit, settings, cache_dir, factory)
    while True:
        try:
            ray.get(find_fleet().register.remote(node_id, [UnitEntry(unit=unit, actor=actor)]), timeout=30)
            print("REGISTERED", unit.name, flush=True)
        except Exception as exc:
            print("NOT YET", type(exc).__name__, flush=True)
        time.sleep(2)
"""


def _can_unshare_mounts() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=10)
    return done.returncode == 0


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[LocalCluster]:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    pytest.importorskip("coremltools")
    if not _can_unshare_mounts():
        pytest.skip("needs `unshare -m` (a mount namespace) to hide the head's files from the worker")
    cluster = new_cluster()
    try:
        hidden = cluster.root / "home"
        hidden.mkdir()
        cluster.start_head()
        # the worker's view: the head's FARM_HOME is an empty tmpfs (private to that namespace)
        hide = (
            "unshare",
            "-m",
            "sh",
            "-c",
            'mount -t tmpfs -o size=1m farm-hidden "$0" && exec "$@"',
            str(hidden),
        )
        cluster.add_node("n2", "127.0.0.2", prefix=hide)
        cluster.wait_nodes(2)
        start_serve(cluster, hidden)
        fixture = Path(__file__).parents[1] / "ios" / "fixtures" / "ideviceinfo-iphone15_4.txt"
        agent = cluster.spawn(
            "ios-agent",
            [
                sys.executable,
                "-c",
                IOS_AGENT,
                cluster.address,
                "127.0.0.2",
                str(fixture),
                str(cluster.root / "n2-cache"),
            ],
        )
        deadline = time.monotonic() + 120
        while "REGISTERED" not in cluster.log("ios-agent"):
            if agent.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the iOS agent did not register:\n{cluster.log('ios-agent')[-3000:]}")
            time.sleep(0.5)
        yield cluster
    finally:
        cluster.stop()


def test_a_coreml_job_runs_on_the_worker_with_an_artifact_only_the_submitter_has(
    two_nodes: LocalCluster, tmp_path: Path
) -> None:
    model = write_renamed_model(tmp_path / "torch_named.onnx")
    home = two_nodes.root / "home"
    done = two_nodes.farm(
        "--home", str(home), "submit", str(model), "--devices", "iphone15", "-t", "coreml/ane",
        "-n", "3", "--warmup", "1", "--address", two_nodes.address, "--json",
        timeout_s=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:] + two_nodes.log("ios-agent")[-2000:]
    document = json.loads(done.stdout)
    (job,) = document["jobs"]
    assert job["status"] == "ok", job.get("error")
    assert "stand-in" in job["runner"]
    assert job["reference"]["missing_outputs"] == []
    assert set(job["reference"]["outputs"]) == set(EXPECTED_OUTPUTS)
    assert job["reference"]["passed"] is True
    # the package reached the worker through the object store: it sits in the worker's cache,
    # whole, under its tree hash (the worker could not read the submitter's copy)
    cached = two_nodes.root / "n2-cache" / job["artifact_sha256"] / "model.mlpackage"
    assert cached.is_dir() and sha256_path(cached) == job["artifact_sha256"]
    assert (home / "artifacts").is_dir()  # the submitter's copy, which the worker never saw
