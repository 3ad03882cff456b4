"""Energy per inference on the host from RAPL: a scripted package counter (tests/scripted_rapl.py)
under `host_telemetry_root` advances with the CPU time this process's threads use; the host agent
reads it over its idle window and the timed runs, and its estimate must match what the script
implies, computed here from the script alone. Where no counter is readable, the job says why at
once, without an idle window."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from ondevice_farm.analysis.energy import counter_energy_estimate, energy_document
from ondevice_farm.errors import UsageError
from ondevice_farm.inputs import resolve_shapes, seeded_inputs
from ondevice_farm.model import inspect_model
from ondevice_farm.profiles import load_profiles
from ondevice_farm.reports.energy_text import energy_summary
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, DeviceRun, RunRequest
from ondevice_farm_agents.host.agent import HostAgent
from tests.scripted_rapl import RAPL_DIR, RaplScript, ScriptedRapl, this_process

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
)
#: the defaults, but a longer loaded window: the script's 25 ms steps want a few dozen of them
ENERGY = {
    "host_energy_idle_s": "1",
    "host_energy_min_active_s": "1.5",
    "host_energy_sample_ms": "20",
    "host_energy_settle_s": "0.5",
}
RUNS = 20


def _run(model: Path, root: Path, extra: dict[str, str] = ENERGY) -> DeviceRun:
    agent = HostAgent(
        AgentSettings(profiles=load_profiles(), extra={**extra, "host_telemetry_root": str(root)})
    )
    (unit,) = agent.discover()
    info = inspect_model(model)
    request = RunRequest(
        artifact=model,
        artifact_sha256=info.sha256,
        target=Target.parse("ort/cpu"),
        inputs=seeded_inputs(info, resolve_shapes(info, {}), 0),
        warmup=2,
        runs=RUNS,
        profile_ops=False,
    )
    return agent.run(unit, request)


def test_energy_per_inference_is_what_the_scripted_rapl_counter_implies(model: Path, tmp_path: Path) -> None:
    # a 1 J range (a real package's is some 262 kJ) wraps every ~0.17 s idle, ~0.06 s loaded: a
    # reader that lost the wrapped intervals would read a baseline 10 % low and far less load
    script = RaplScript(idle_w=6.0, load_w=18.0, start_uj=500_000, max_energy_range_uj=1_000_000)
    with ScriptedRapl(tmp_path, script, this_process) as rapl:
        run = _run(model, tmp_path)
    energy = run.energy
    assert energy is not None and not energy.absent, energy
    assert energy.mj_per_inference is not None and energy.uncertainty_mj is not None
    assert energy.baseline_mw is not None and energy.active_mw is not None and energy.active_s
    assert rapl.wraps >= 10
    # independently of the code under test: the script's two levels (W = J/s, so W x s x 1000 = mJ)
    idle_mw, load_mw = script.idle_w * 1000, script.load_w * 1000
    implied_mj = (load_mw - idle_mw) * energy.active_s / energy.inferences
    assert energy.baseline_mw == pytest.approx(idle_mw, rel=0.05)
    # the job keeps a core busy, past the script's saturation, unless this machine starves it;
    # the counter moves in the script's 10 ms steps, so a window's ends may each gain one (~1.5 %)
    assert 0.8 * load_mw <= energy.active_mw <= load_mw * 1.03
    assert 0.7 * implied_mj <= energy.mj_per_inference <= 1.05 * implied_mj
    # forgetting the idle baseline would give the whole package's draw: outside the band
    assert energy.active_mw * energy.active_s / energy.inferences > 1.05 * implied_mj
    assert 0 < energy.uncertainty_mj < 0.3 * energy.mj_per_inference
    assert energy.inferences >= RUNS and energy.active_s >= 1.5
    assert energy.idle_samples >= 30 and energy.active_samples >= 50
    assert energy.method.startswith(
        f"RAPL package-0 energy counter ({tmp_path / RAPL_DIR}/energy_uj) read every 20 ms; "
        "the mean power over 1.0 s idle before the timed runs subtracted"
    )
    assert energy.sign_convention == "" and len(run.samples_ms) == RUNS
    document = energy_document(energy)
    assert document["estimated"] is True and document["source"] == "estimated"
    jsonschema.validate(document, SCHEMA["$defs"]["energy"])
    # the terminal's and the HTML report's line: no battery, so no sign convention in it
    assert energy_summary({"energy": document}) == (
        f"{energy.mj_per_inference:.4g} ± {energy.uncertainty_mj:.2g} mJ/inference (estimated: "
        f"{energy.active_mw:.0f} mW under load - {energy.baseline_mw:.0f} mW idle over {energy.inferences} "
        "inferences)"
    )


def test_no_rapl_gives_the_reason_at_once_without_an_idle_window(model: Path, tmp_path: Path) -> None:
    slow = {**ENERGY, "host_energy_idle_s": "30"}
    start = time.monotonic()
    run = _run(model, tmp_path, slow)
    assert time.monotonic() - start < 20  # no 30 s idle window was spent
    assert run.energy is not None and run.energy.mj_per_inference is None
    assert run.energy.absent == (
        f"no RAPL package counter (intel-rapl:N) under {tmp_path}/sys/class/powercap: a virtual "
        "machine, or a CPU or kernel without the powercap RAPL driver"
    )


def test_an_unreadable_counter_says_which_file(model: Path, tmp_path: Path) -> None:
    (tmp_path / RAPL_DIR / "energy_uj").mkdir(parents=True)  # a read fails, whoever reads it
    run = _run(model, tmp_path)
    assert run.energy is not None and run.energy.mj_per_inference is None
    assert run.energy.absent.startswith(f"{tmp_path / RAPL_DIR}/energy_uj cannot be read (IsADirectoryError")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_a_root_only_counter_says_how_to_open_it(model: Path, tmp_path: Path) -> None:
    counter = tmp_path / RAPL_DIR / "energy_uj"
    counter.parent.mkdir(parents=True)
    counter.write_text("12345\n")
    counter.chmod(0o000)
    run = _run(model, tmp_path)
    assert run.energy is not None
    assert "not readable by this user (root-only since Linux 5.10" in run.energy.absent


def test_energy_idle_zero_turns_it_off(model: Path, tmp_path: Path) -> None:
    script = RaplScript(idle_w=6.0, load_w=18.0)
    with ScriptedRapl(tmp_path, script, this_process):
        run = _run(model, tmp_path, {"host_energy_idle_s": "0"})
    assert run.energy is None


@pytest.mark.parametrize("key", ["host_energy_idle_s", "host_energy_sample_ms"])
def test_a_bad_energy_setting_is_a_usage_error(key: str) -> None:
    with pytest.raises(UsageError, match=f"^{key} must be a number"):
        HostAgent(AgentSettings(extra={key: "soon"}))


def test_the_counter_arithmetic_weights_intervals_by_their_length() -> None:
    """Constructed readings (synthetic, not measured): the arithmetic only. Idle 5 W, then 15 W,
    read at uneven intervals; an unweighted mean of the intervals' powers would be off."""
    t = [0.0, 0.1, 0.4, 0.5, 1.0, 1.1, 1.2, 1.6, 2.0]
    watts = [5.0, 5.0, 5.0, 5.0, 15.0, 15.0, 15.0, 15.0]  # per interval
    watts[1] = 7.0  # one long idle interval drew more
    energy = np.concatenate([[0.0], np.cumsum(np.diff(t) * np.asarray(watts) * 1e6)])
    section = {
        "idle": {"start_s": 0.0, "end_s": 1.0},
        "active": {"start_s": 1.0, "end_s": 2.0, "inferences": 10},
        "t_s": t,
        "energy_uj": energy.tolist(),
        "sample_period_ms": 100,
    }
    estimate = counter_energy_estimate(section, "a counter")
    assert estimate.baseline_mw == pytest.approx((5.0 * 0.7 + 7.0 * 0.3) * 1000)  # 5.6 W over 1 s
    assert estimate.active_mw == pytest.approx(15_000)
    assert estimate.mj_per_inference == pytest.approx((15_000 - 5_600) * 1.0 / 10)
    assert estimate.idle_samples == 4 and estimate.active_samples == 4
    assert estimate.uncertainty_mj is not None and estimate.uncertainty_mj > 0
    assert estimate.method.startswith("a counter read every 100 ms")
