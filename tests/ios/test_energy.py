"""iOS energy per inference at the diagnostics relay's boundary.

The fake phone serves the IORegistry `IOPMPowerSource` entry through the same call the agent
makes on a real phone (`DiagnosticsService.ioregistry(ioclass="IOPMPowerSource")`); the agent
samples it over an idle window and through the job, lines the samples up with the loaded window
the app (the host stand-in) reports, and integrates. The charging entry is a recording of a real
iPhone (fixtures/README.md); the discharging one is that recording with its charging flags off and
gauge currents chosen here, so the estimate can be checked against a hand-computed figure.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from pymobiledevice3.services.diagnostics import DiagnosticsService

from ondevice_farm.analysis.energy import energy_document
from ondevice_farm_agents.ios.agent import IosAgent

from .conftest import MakeAgent, MakePhone, MakeRequest

CHARGING = json.loads((Path(__file__).parent / "fixtures/ioregistry-battery-charging.json").read_text())
ENERGY = {"ios_energy_idle_s": "0.4", "ios_energy_min_active_s": "0.6", "ios_energy_sample_s": "0.04"}
IDLE_MA, BUSY_MA = 180, 620  # chosen, not recorded: discharge currents at idle and with the app running


def discharging(current_ma: int, unsigned: bool = False) -> dict[str, Any]:
    """The recorded entry off the charger: flags false, the gauge current negative (discharge),
    optionally as the unsigned 64-bit value some tools print."""
    entry = {**CHARGING, "AppleRawExternalConnected": False, "ExternalConnected": False, "IsCharging": False}
    entry["InstantAmperage"] = (1 << 64) - current_ma if unsigned else -current_ma
    entry["Voltage"] = CHARGING["AppleRawBatteryVoltage"]
    return entry


def test_a_phone_off_the_charger_reports_energy_per_inference_from_its_gauge(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    phone = make_phone()
    phone.battery_registry = {"idle": discharging(IDLE_MA), "busy": discharging(BUSY_MA, unsigned=True)}
    agent = make_agent(phone, extra=ENERGY)
    (unit,) = agent.discover()

    run = agent.run(unit, make_request(runs=5))

    energy = run.energy
    assert energy is not None and not energy.absent, energy
    mv = CHARGING["AppleRawBatteryVoltage"]
    assert energy.baseline_mw == pytest.approx(IDLE_MA * mv / 1000)
    assert energy.active_mw == pytest.approx(BUSY_MA * mv / 1000)
    assert energy.active_s is not None and energy.active_s >= 0.6  # the app held the load that long
    assert energy.inferences >= 5  # the timed runs and the untimed ones after them
    expected = (BUSY_MA - IDLE_MA) * mv / 1000 * energy.active_s / energy.inferences
    assert energy.mj_per_inference == pytest.approx(expected)
    assert energy.idle_samples >= 2 and energy.active_samples >= 2
    assert energy.sign_convention == "negative while discharging"
    assert "InstantAmperage x Voltage" in energy.method and "diagnostics relay" in energy.method
    document = energy_document(energy)
    assert document["estimated"] is True and document["source"] == "estimated"
    reads = [s for op, s in phone.operations if op == "ioregistry"]
    assert reads and set(reads) == {"IOPMPowerSource"}


def test_a_charging_phone_gets_no_figure_only_the_reason_and_no_idle_wait(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    phone = make_phone()
    phone.battery_registry = {"idle": dict(CHARGING), "busy": dict(CHARGING)}
    agent = make_agent(phone, extra={**ENERGY, "ios_energy_idle_s": "30"})
    (unit,) = agent.discover()

    run = agent.run(unit, make_request(runs=3))

    assert run.energy is not None and run.energy.mj_per_inference is None
    assert "external power" in run.energy.absent and "ExternalConnected" in run.energy.absent
    # one read told it: no 30 s idle window, no loaded window for the app to hold
    assert [op for op, _ in phone.operations].count("ioregistry") == 1
    assert len(run.samples_ms) == 3


def test_a_phone_whose_relay_shows_no_battery_says_so(ios_agent: IosAgent, make_request: MakeRequest) -> None:
    (unit,) = ios_agent.discover()
    run = ios_agent.run(unit, make_request(runs=2))
    assert run.energy is not None and "no battery current and voltage" in run.energy.absent


def test_the_call_the_agent_makes_is_pymobiledevice3_s_own() -> None:
    # plainly imported: a renamed module fails here (tests/ios/test_pymobiledevice3_surface.py checks
    # every call the fakes copy)
    parameters = list(inspect.signature(DiagnosticsService.ioregistry).parameters)
    assert parameters == ["self", "plane", "name", "ioclass"]
    assert inspect.iscoroutinefunction(DiagnosticsService.ioregistry)
