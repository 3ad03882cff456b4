"""Warm load and the sustained phase on the iOS path (#20), over the host stand-in, which
measures both for real on this host: a second load of the same model (ONNX Runtime session or
the compiled ML Program) while the first is held, and predictions back to back cut into windows.
The stand-in has no `ProcessInfo.thermalState`: its windows carry none and say why. How the
thermal state becomes the throttle signal is checked on the contract's example result, whose
numbers are illustrations (docs/ios-runner.md)."""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from ondevice_farm.analysis.job import job_document
from ondevice_farm.analysis.numeric import default_tolerance
from ondevice_farm.analysis.sustained import sustained_document
from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile import compile_for_target
from ondevice_farm.reference import reference_outputs
from ondevice_farm.reports.compare import Column
from ondevice_farm.reports.html_sustained import sustained
from ondevice_farm.reports.sustained_text import sustained_lines
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import RunRequest
from ondevice_farm_agents.ios.agent import IosAgent
from ondevice_farm_agents.ios.contract import parse_result
from ondevice_farm_agents.ios.standin_phases import NO_THERMAL_STATE
from ondevice_farm_agents.ios.sustained import sustained_trace

from .conftest import MakeAgent, MakePhone, MakeRequest
from .renamed_model import renamed_inputs, write_renamed_model

RUN_SCHEMA = Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json"
ANE = Target.parse("coreml/ane")


def test_an_onnx_job_reports_a_measured_warm_load_beside_the_first(
    ios_agent: IosAgent, make_request: MakeRequest
) -> None:
    (unit,) = ios_agent.discover()
    request = make_request(runs=3)
    ios_agent.prepare(unit, request)

    run = ios_agent.run(unit, request)

    assert run.warm_load_ms is not None and run.warm_load_ms > 0
    assert run.warm_load_ms != run.load_ms  # two separate measurements, not one number copied
    assert run.warm_load_method == "compiled model loaded again in the same process"
    assert any("warm load = a second load" in note for note in run.notes)
    assert run.sustained is None  # none asked for


def test_an_ml_program_job_loads_twice_and_runs_a_sustained_phase(
    ios_agent: IosAgent, tmp_path: Path
) -> None:
    pytest.importorskip("coremltools")
    model = write_renamed_model(tmp_path / "torch_named.onnx")
    artifact = compile_for_target(model, ANE, ArtifactStore(tmp_path / "artifacts"))
    (unit,) = ios_agent.discover()
    request = RunRequest(
        artifact=artifact.path, artifact_sha256=artifact.sha256, target=ANE, inputs=renamed_inputs(),
        warmup=1, runs=3, io_names=artifact.io_names, sustained_s=1.2, sustained_window_s=0.3,
        timeout_s=30.0,
    )  # fmt: skip
    ios_agent.prepare(unit, request)

    run = ios_agent.run(unit, request)

    assert run.warm_load_ms is not None and run.warm_load_ms > 0
    trace = run.sustained
    assert trace is not None and (trace.duration_s, trace.window_s) == (1.2, 0.3)
    assert len(trace.windows) >= 3 and all(w.samples_ms for w in trace.windows)
    assert trace.windows[-1].end_s == pytest.approx(1.2, abs=0.5)
    assert all(w.telemetry.thermal_status is None for w in trace.windows)
    assert NO_THERMAL_STATE in trace.unavailable
    document = job_document(
        base={"job_id": "j", "device": "iphone15", "target": ANE.name},
        target=ANE,
        artifact=artifact,
        run=run,
        reference=reference_outputs(model, "torch-named", request.inputs, tmp_path / "refs"),
        tolerance=default_tolerance(ANE, artifact.report.precision),
    )
    assert document["warm_load_ms"] == run.warm_load_ms
    assert document["warm_load_method"] == run.warm_load_method
    summary = document["sustained"]["summary"]
    assert summary["inferences"] == sum(len(w.samples_ms) for w in trace.windows) > 3
    assert summary["thermal_status_reached"] is None and summary["throttle_signal"] != "thermal"
    assert summary["first_p50_ms"] > 0 and summary["steady_p50_ms"] > 0
    defs = json.loads(RUN_SCHEMA.read_text())["$defs"]
    sustained_schema = {"$ref": "#/$defs/sustained", "$defs": defs}
    jsonschema.Draft202012Validator(sustained_schema).validate(document["sustained"])


def test_a_phone_s_thermal_state_is_the_throttle_signal_of_the_summary() -> None:
    text = resources.files("ondevice_farm_agents.ios").joinpath("runner_contract/example-result.json")
    result = parse_result(text.read_bytes(), "3f9c2a7b1d0e4c55", "phone")
    assert result.warm_load_ms == 21.4 and result.timed_span_unix_s is not None
    assert result.sustained is not None

    document = sustained_document(sustained_trace(result.sustained))
    summary = document["summary"]

    # the example leaves nominal at the end of its second window (5 s -> 10 s)
    assert (summary["throttle_signal"], summary["time_to_first_throttle_s"]) == ("thermal", 10.0)
    assert summary["thermal_status_reached"] == "serious"
    shown = sustained_lines({"sustained": document}).plain
    assert "throttles at 10 s (thermal)" in shown and "thermal state reached serious" in shown
    job = {"sustained": document, "load_ms": 96.3, "warm_load_ms": 21.4}
    html = sustained([Column("iphone15 coreml/ane", "r", "iphone15", "coreml/ane", "ok", job)])
    assert "<td>serious</td>" in html and "iOS does not expose them to apps" in html
    nominal = dataclasses.replace(
        sustained_trace(result.sustained),
        windows=[
            dataclasses.replace(w, telemetry=dataclasses.replace(w.telemetry, thermal_status="nominal"))
            for w in sustained_trace(result.sustained).windows
        ],
    )
    assert sustained_document(nominal)["summary"]["throttle_signal"] != "thermal"


def test_a_repeat_session_measures_latency_only(
    make_agent: MakeAgent, make_phone: MakePhone, make_request: MakeRequest
) -> None:
    """The first session carries the sustained phase and the energy sampling; a repeat does neither."""
    from ondevice_farm_agents.repeats import run_repeats

    phone = make_phone()
    agent = make_agent(phone)
    (unit,) = agent.discover()
    request = dataclasses.replace(make_request(runs=3), repeats=2, sustained_s=0.4, sustained_window_s=0.2)

    run = run_repeats(agent, unit, request)

    assert run.sustained is not None and len(run.repeat_samples_ms) == 2
    assert [len(s) for s in run.repeat_samples_ms] == [3, 3]
    # one battery read for the first session (no gauge values: no idle window), none for the repeat
    assert [op for op, _ in phone.operations].count("ioregistry") == 1
