"""`farm submit --fix` on a `coreml/*` target: the submission's pin reaches the CoreML lowering
(the model's sample-rate `If` folds), the job is not sent the input the ML Program holds as a
constant, and the iOS stand-in runs it and agrees with the host reference, which ran with the
pinned value. And `farm compile --fix NAME` takes the value from --example-inputs."""

from __future__ import annotations

import json
import plistlib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ondevice_farm.config import FarmHome
from ondevice_farm.controller.pipeline import compile_all, run_request
from ondevice_farm.controller.submission import prepare
from ondevice_farm.controller.submit_request import SubmitRequest
from ondevice_farm.profiles import load_profiles
from ondevice_farm.progress import SilentProgress
from ondevice_farm.reference import reference_outputs
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings
from ondevice_farm_agents.ios.agent import DEFAULT_BUNDLE_ID, IosAgent
from ondevice_farm_agents.ios.fakes import parse_ideviceinfo
from ondevice_farm_agents.ios.standin_app import standin_agent
from tests.core.pinned_model import X, sample_rate_branch

pytest.importorskip("coremltools")
ANE = Target.parse("coreml/ane")
IPHONE15 = Path(__file__).parents[1] / "ios" / "fixtures" / "ideviceinfo-iphone15_4.txt"


@pytest.fixture
def ios_agent(tmp_path: Path) -> Iterator[IosAgent]:
    """One fake iPhone 15 whose FarmRunner is the host stand-in (as tests/ios/conftest.py makes it)."""
    package = tmp_path / "FarmRunner-7.ipa"
    info = {
        "CFBundleIdentifier": DEFAULT_BUNDLE_ID,
        "CFBundleVersion": "7",
        "CFBundleExecutable": "FarmRunner",
    }
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("Payload/FarmRunner.app/Info.plist", plistlib.dumps(info, fmt=plistlib.FMT_BINARY))
    extra = {"ios_app_package": str(package), "ios_poll_s": "0.01", "ios_thermal_deadline_s": "2"}
    settings = AgentSettings(profiles=load_profiles(), io_timeout_s=10.0, extra=extra)
    agent = standin_agent(settings, parse_ideviceinfo(IPHONE15.read_text()))
    try:
        yield agent
    finally:
        agent.close()


def test_a_submitted_pin_folds_the_coreml_compile_and_the_stand_in_runs_the_job(
    ios_agent: IosAgent, tmp_path: Path
) -> None:
    model = sample_rate_branch(tmp_path / "vad_like.onnx")
    npz = tmp_path / "x.npz"
    np.savez(npz, x=X)
    request = SubmitRequest(
        model_path=model, devices="iphone15", targets=[ANE], inputs_npz=npz, fixed_inputs={"sr": 16000.0}
    )
    prepared = prepare(request, load_profiles())
    home = FarmHome(tmp_path / "home")

    artifact = compile_all(request, prepared, home, SilentProgress())[ANE]

    assert not isinstance(artifact, Exception), artifact
    assert artifact.report.extra["fixed_inputs"] == {"sr": 16000.0}
    assert artifact.report.extra["folded"].get("If") == 1
    job = run_request(request, prepared, artifact)
    assert sorted(job.inputs) == ["x"]  # the stand-in refuses a job naming a feature it lacks
    (unit,) = ios_agent.discover()
    ios_agent.prepare(unit, job)
    run = ios_agent.run(unit, job)
    reference = reference_outputs(model, prepared.info.sha256, prepared.inputs, home.references)
    np.testing.assert_allclose(reference["y"], X * 2)  # the host ran the pinned 16 kHz branch
    np.testing.assert_allclose(run.outputs["y"], reference["y"], rtol=1e-3)


def test_farm_compile_fix_takes_the_value_from_example_inputs(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ondevice_farm.cli.main import cli

    model = sample_rate_branch(tmp_path / "vad_like.onnx")
    npz = tmp_path / "in.npz"
    np.savez(npz, sr=np.array(8000, np.int64))
    args = ["--home", str(tmp_path / "home"), "compile", str(model), "-t", "coreml/ane", "--json"]

    result = CliRunner().invoke(cli, [*args, "--fix", "sr", "--example-inputs", str(npz)])

    assert result.exit_code == 0, result.output
    (target,) = json.loads(result.stdout)["targets"]
    assert target["report"]["extra"]["fixed_inputs"] == {"sr": 8000}
    np.savez(npz, x=X)
    missing = CliRunner().invoke(cli, [*args, "--fix", "sr", "--example-inputs", str(npz)])
    assert missing.exit_code == 2 and "has no array 'sr'" in missing.output
