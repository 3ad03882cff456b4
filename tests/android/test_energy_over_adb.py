"""Energy per inference on an Android unit: the ADB peer serves a battery scripted from recorded
real readings (tests/android/battery_scripts.py), whose current follows the CPU the unit's own
processes use; the native runner samples it over an idle window and the timed runs, and the
estimate must match what the script implies, computed here from the script alone."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ondevice_farm.cli.main import cli
from ondevice_farm.metrics.collector import FarmCollector, farm_registry
from ondevice_farm.profiles import load_profiles
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.native_build import RunnerBuild
from ondevice_farm_agents.base import AgentSettings, DeviceRun, RunRequest
from tests.android.adb_peer import BatteryScript
from tests.android.battery_scripts import MI8_CHARGING, PIXEL_DISCHARGING, QUALCOMM_DISCHARGING
from tests.android.peer_fixtures import PIXEL8, PeerHandle, one_unit, start_peer

#: short windows keep each test quick; the defaults (3 s each) are for phones
ENERGY = {
    "energy_idle_s": "1.5",
    "energy_min_active_s": "2",
    "energy_sample_ms": "20",
    "energy_settle_s": "0.8",
}
Model = tuple[Path, str, dict[str, np.ndarray]]
REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "farm/ondevice_farm/schema/run.schema.json").read_text())


@pytest.fixture
def phone(request: pytest.FixtureRequest, tmp_path: Path, adb_key: Path) -> Iterator[PeerHandle]:
    script: BatteryScript | None = request.param
    peer = start_peer(tmp_path / "phone", adb_key, PIXEL8, battery=script)
    try:
        yield PeerHandle(peer.host, peer.port, adb_key, peer.sandbox.root, peer)
    finally:
        peer.stop()


def _run(peer: PeerHandle, model: Model, extra: dict[str, str] = ENERGY) -> DeviceRun:
    path, sha, inputs = model
    settings = AgentSettings(
        profiles=load_profiles(),
        adb_tcp_addresses=(peer.address,),
        adb_key_path=peer.key_path,
        io_timeout_s=5,
        extra=dict(extra),
    )
    request = RunRequest(path, sha, Target.parse("ort/cpu"), inputs, warmup=2, runs=20, profile_ops=False)
    with one_unit(settings) as (agent, unit):
        return agent.run(unit, request)


@pytest.mark.parametrize(
    ("phone", "convention"),
    [(PIXEL_DISCHARGING, "negative while discharging"), (QUALCOMM_DISCHARGING, "positive while discharging")],
    indirect=["phone"],
)
def test_energy_per_inference_is_what_the_scripted_battery_implies(
    native_runner: RunnerBuild, phone: PeerHandle, small_model: Model, convention: str
) -> None:
    script = phone.peer.battery.script if phone.peer.battery else None
    assert script is not None
    run = _run(phone, small_model)
    energy = run.energy
    assert energy is not None and not energy.absent, energy
    assert energy.mj_per_inference is not None and energy.uncertainty_mj is not None
    assert energy.baseline_mw is not None and energy.active_mw is not None and energy.active_s
    # independently of the code under test: the script's two levels, at its voltage
    idle_mw = script.idle_ua * script.voltage_uv / 1e9
    load_mw = script.load_ua * script.voltage_uv / 1e9
    implied_mj = (load_mw - idle_mw) * energy.active_s / energy.inferences
    assert energy.sign_convention == convention
    assert energy.baseline_mw == pytest.approx(idle_mw, rel=0.05)
    # the runner keeps a core busy, past the script's saturation, unless this machine starves it
    assert 0.8 * load_mw <= energy.active_mw <= load_mw * 1.001
    assert 0.7 * implied_mj <= energy.mj_per_inference <= 1.05 * implied_mj
    assert 0 < energy.uncertainty_mj < 0.2 * energy.mj_per_inference
    assert energy.inferences >= 20 and energy.active_s >= 2.0
    assert energy.idle_samples >= 30 and energy.active_samples >= 40
    assert "current_now x voltage_now sampled every 20 ms" in energy.method
    # the timed runs themselves are unchanged: 20 samples
    assert len(run.samples_ms) == 20


@pytest.mark.parametrize("phone", [MI8_CHARGING], indirect=True)
def test_a_charging_unit_gives_no_figure_and_says_how_to_get_one(
    native_runner: RunnerBuild, phone: PeerHandle, small_model: Model
) -> None:
    energy = _run(phone, small_model).energy
    assert energy is not None and energy.mj_per_inference is None
    assert energy.absent.startswith(
        "the device is charging (USB powered); energy needs a device off the charger"
    )
    assert "dumpsys battery unplug" in energy.absent and "cmd battery unplug" in energy.absent
    assert "does not stop the charger" in energy.absent


@pytest.mark.parametrize("phone", [None], indirect=True)
def test_a_unit_without_a_readable_battery_says_so(
    native_runner: RunnerBuild, phone: PeerHandle, small_model: Model
) -> None:
    energy = _run(phone, small_model).energy
    assert energy is not None and energy.mj_per_inference is None
    assert "no readable /sys/class/power_supply/battery/current_now" in energy.absent


@pytest.mark.parametrize("phone", [PIXEL_DISCHARGING], indirect=True)
def test_farm_submit_shows_stores_and_exports_the_energy_figure(
    native_runner: RunnerBuild, phone: PeerHandle, tmp_path: Path
) -> None:
    model = tmp_path / "tinynet.onnx"
    shutil.copy(REPO / "examples/tinynet.onnx", model)
    home = ["--home", str(tmp_path / "home")]
    env = {"FARM_ADB_KEY": str(phone.key_path), **{f"FARM_AGENT_{k.upper()}": v for k, v in ENERGY.items()}}
    args = [*home, "submit", str(model), "--devices", "pixel8", "--adb", phone.address]
    args += ["--targets", "ort/cpu", "--runs", "10", "--warmup", "2", "--no-profile", "--json"]
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    (job,) = document["jobs"]
    energy = job["energy"]
    assert energy["estimated"] is True and energy["source"] == "estimated" and energy["absent"] is None
    assert energy["mj_per_inference"] > 0 and energy["sign_convention"] == "negative while discharging"

    shown = CliRunner().invoke(cli, [*home, "show", document["run_id"]], catch_exceptions=False)
    assert f"energy {energy['mj_per_inference']:.4g} ± " in shown.stdout
    assert "mJ/inference (estimated:" in shown.stdout
    html = tmp_path / "report.html"
    reported = CliRunner().invoke(cli, [*home, "report", document["run_id"], "--html", str(html)])
    assert reported.exit_code == 0, reported.stderr
    assert 'id="energy"' in html.read_text() and "mJ/inference (estimated:" in html.read_text()

    collector = FarmCollector(tmp_path / "home" / "results.sqlite")
    try:
        text = generate_latest(farm_registry(collector)).decode()
    finally:
        collector.close()
    (sample,) = [
        s
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "farm_energy_per_inference_joules"
    ]
    assert sample.labels["source"] == "estimated" and sample.labels["device"] == "pixel8"
    assert sample.value == pytest.approx(energy["mj_per_inference"] / 1000)
