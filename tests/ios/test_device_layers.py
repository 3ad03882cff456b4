"""`farm diverge --on-device` for a CoreML job: the copy of the model with its intermediates exposed
is lowered to an ML Program and run by FarmRunner on the job's iPhone, through a real Ray fleet.

The iPhone is a fake phone at pymobiledevice3's service boundary whose FarmRunner is the host
stand-in: it runs the ML Program in the host MIL executor, so the curve is the lowered program's
numbers on this host (its note says so), measured through the whole on-device path: exposure,
lowering with the I/O name map, the job file, the agent, the reference check of each exposed
tensor. A model built to overflow fp16 at a known op must be reported there.
"""

from __future__ import annotations

import functools
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from ondevice_farm.analysis.divergence import search_divergence
from ondevice_farm.analysis.intermediates import layer_points
from ondevice_farm.cli.main import cli
from ondevice_farm.config import FarmHome
from ondevice_farm.controller.cluster import RAY_NAMESPACE, ClusterConfig
from ondevice_farm.controller.layer_probe import LAYER_ALIAS_SUFFIX, device_measure, exposed_copy, layer_note
from ondevice_farm.profiles import DeviceProfile
from ondevice_farm.reports.layers import snr_floor_db
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings
from ondevice_farm_agents.ios.standin_app import standin_agent
from tests.report.diverging_models import PLANTED_NODE, overflowing_model

from .conftest import IPHONE15, lockdown_values

ANE = Target.parse("coreml/ane")
#: a local Ray and its controller take 10-30 s to start on a loaded CI machine; the test itself ~6 s
SLOW = pytest.mark.slow


@pytest.fixture(scope="module")
def ios_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FarmHome, AgentSettings]]:
    """A local Ray with a farm controller (fleet actor) and one stand-in iPhone 15 registered."""
    if not all(name == "lo" for _, name in socket.if_nameindex()):
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    pytest.importorskip("coremltools")
    import ray

    from ondevice_farm.controller.actor import device_actor_class
    from ondevice_farm.controller.fleet import FLEET_ACTOR_NAME, UnitEntry, fleet_actor_class
    from ondevice_farm.profiles import load_profiles

    root = tmp_path_factory.mktemp("ios-fleet")
    home = FarmHome(root / "home")
    home.ensure()
    owned = not ray.is_initialized()  # another module's Ray serves as well
    if owned:
        ray.init(
            address="local",
            include_dashboard=False,
            num_cpus=2,
            object_store_memory=80 * 1024 * 1024,
            log_to_driver=False,
            logging_level=logging.ERROR,
        )
    started: list[Any] = []
    try:
        settings = AgentSettings(
            profiles=load_profiles(),
            io_timeout_s=20.0,
            extra={"ios_poll_s": "0.02", "ios_thermal_deadline_s": "5"},
        )
        factory = functools.partial(standin_agent, lockdown_values=lockdown_values(IPHONE15))
        fleet = (
            fleet_actor_class()
            .options(name=FLEET_ACTOR_NAME, namespace=RAY_NAMESPACE)
            .remote(store_location=str(home.store_path))
        )
        started.append(fleet)
        (unit,) = factory(settings).discover()
        actor = device_actor_class().remote(unit, settings, str(root / "cache"), factory)
        started.append(actor)
        node_id = ray.get_runtime_context().get_node_id()
        ray.get(fleet.register.remote(node_id, [UnitEntry(unit=unit, actor=actor)]), timeout=60)
        yield home, settings
    finally:
        for handle in started:
            ray.kill(handle)
        if owned:
            ray.shutdown()


def test_the_exposed_copy_of_a_coreml_job_keeps_each_tensor_behind_an_identity(tmp_path: Path) -> None:
    model = onnx.load(str(overflowing_model(tmp_path / "overflow.onnx")))
    tensors = [p.tensor for p in layer_points(model)]

    exposed, names = exposed_copy(model, tensors, ANE)

    assert names["y"] == "y"  # the model's own output stays as it is
    assert names["h5"] == "h5" + LAYER_ALIAS_SUFFIX
    order = ["y", *[t for t in tensors if t != "y"]]
    assert [o.name for o in exposed.graph.output] == [names[t] for t in order]
    onnx.checker.check_model(exposed)
    _, same = exposed_copy(model, tensors, Target.parse("ort/cpu"))
    assert same == {t: t for t in tensors}  # ONNX Runtime jobs are exposed as before


@SLOW
def test_a_planted_fp16_overflow_is_found_on_the_iphone_s_ml_program(
    ios_fleet: tuple[FarmHome, AgentSettings], profiles: dict[str, DeviceProfile], tmp_path: Path
) -> None:
    home, settings = ios_fleet
    path = overflowing_model(tmp_path / "overflow.onnx")
    run: dict[str, Any] = {"settings": {"seed": 0}, "model": {"inputs": [{"name": "x", "shape": [1, 16]}]}}
    job = {"device": "iphone15", "requested": "iphone15", "target": ANE.name, "precision": "fp16"}
    floor = snr_floor_db(ANE.name, "fp16")
    runners: list[str] = []
    measure = device_measure(
        path, run, job, floor, home=home, profiles=settings.profiles, settings=settings,
        cluster=ClusterConfig(address="in-process"), runners=runners,
    )  # fmt: skip
    points = layer_points(onnx.load(str(path)))

    with np.errstate(over="ignore", invalid="ignore"):
        layers, first, method, runs = search_divergence(points, measure, budget=16)

    assert (method, runs) == ("all", 1)
    assert first is not None and first.point.node == PLANTED_NODE and first.point.op_type == "Mul"
    assert first.nonfinite > 0  # fp16 overflowed to inf in the program, as on the phone it would
    before = [layer for layer in layers if layer.point.depth < first.point.depth]
    assert before and all(not layer.diverged for layer in before)
    assert len(layers) == len(points)  # every exposed tensor came back through the name map
    (runner,) = runners
    assert "stand-in" in runner
    note = layer_note(runner)
    assert "exposed as outputs" in note and "host's MIL executor" in note and "not CoreML" in note


@SLOW
def test_farm_submit_and_diverge_on_device_for_an_iphone_job(
    ios_fleet: tuple[FarmHome, AgentSettings], tmp_path: Path
) -> None:
    """The CLI over the fleet: a CoreML job with a short sustained phase (warm load and windows in
    its document), then `farm diverge --on-device` replacing the job's predicted curve with the one
    from the iPhone's program."""
    home, _ = ios_fleet
    model = overflowing_model(tmp_path / "overflow.onnx")
    base = ["--home", str(home.root)]
    submitted = CliRunner().invoke(
        cli,
        [*base, "submit", str(model), "--devices", "iphone15", "-t", "coreml/ane", "-n", "3",
         "--warmup", "1", "--sustained", "1.5s", "--sustained-window", "0.5", "--address", "in-process",
         "--json"],
        catch_exceptions=False,
    )  # fmt: skip
    # the planted overflow fails the output check (exit 9), and the run is complete all the same
    assert submitted.exit_code == 9 and "reference check failed" in submitted.stderr, submitted.stderr
    document = json.loads(submitted.stdout)
    (job,) = document["jobs"]
    assert job["status"] == "ok" and job["reference"]["passed"] is False
    assert job["warm_load_ms"] is not None and job["warm_load_ms"] > 0
    sustained = job["sustained"]
    assert len(sustained["windows"]) >= 2 and sustained["summary"]["inferences"] > 3
    assert any("thermal state" in reason for reason in sustained["unavailable"])
    run_id = document["run_id"]

    predicted = CliRunner().invoke(cli, [*base, "diverge", run_id, "--json"], catch_exceptions=False)
    assert predicted.exit_code == 0, predicted.stderr
    (curve,) = json.loads(predicted.stdout)["curves"]
    assert curve["source"] == "predicted"

    measured = CliRunner().invoke(
        cli, [*base, "diverge", run_id, "--on-device", "--address", "in-process", "--json"],
        catch_exceptions=False,
    )  # fmt: skip
    assert measured.exit_code == 0, measured.stderr
    layers = json.loads(measured.stdout)
    (curve,) = layers["curves"]
    assert curve["source"] == "measured" and (curve["method"], curve["runs"]) == ("all", 1)
    assert "stand-in" in curve["note"] and "not CoreML on an iPhone" in curve["note"]
    assert curve["first_divergent"]["node"] == PLANTED_NODE
