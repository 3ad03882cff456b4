"""The runner contract: both schemas, the documented examples, and how the host reads results."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from ondevice_farm.errors import CompileError, DeviceError, DeviceTimeoutError
from ondevice_farm_agents.ios.contract import JOB_SCHEMA, RESULT_SCHEMA, contract_errors, parse_result


def example(name: str) -> dict[str, Any]:
    text = resources.files("ondevice_farm_agents.ios").joinpath("runner_contract").joinpath(name).read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def test_the_documented_examples_follow_the_schemas() -> None:
    assert contract_errors(example("example-job.json"), JOB_SCHEMA) == []
    assert contract_errors(example("example-result.json"), RESULT_SCHEMA) == []
    assert contract_errors(example("example-error-result.json"), RESULT_SCHEMA) == []


def test_the_example_result_reads_as_timings_outputs_and_placement() -> None:
    raw = json.dumps(example("example-result.json")).encode()

    result = parse_result(raw, "3f9c2a7b1d0e4c55", "phone")

    assert (result.compile_ms, result.load_ms, result.first_inference_ms) == (412.7, 96.3, 7.9)
    # the feature name the app wrote, and the ONNX name it echoed from the job's output list
    assert [(o.name, o.onnx_name) for o in result.outputs] == [("t_495", "495")]
    assert {op.name: op.preferred_device for op in result.plan_ops}["conv_0"] == "ANE"
    assert (result.thermal_before, result.thermal_after) == ("nominal", "fair")


def test_a_result_that_timed_no_compile_reads_as_none_not_zero() -> None:
    document = example("example-result.json")
    del document["timings_ms"]["compile"]

    result = parse_result(json.dumps(document).encode(), "3f9c2a7b1d0e4c55", "phone")

    assert (result.compile_ms, result.load_ms) == (None, 96.3)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d.pop("runs"), "(top)"),
        (lambda d: d.update(compute_units="neuralEngine"), "compute_units"),
        (lambda d: d["model"].update(path="/private/var/model.mlpackage"), "model/path"),
        (lambda d: d["inputs"][0].update(dtype="int64"), "inputs/0/dtype"),
        (lambda d: d["inputs"][0].pop("onnx_name"), "inputs/0"),
        (lambda d: d.pop("outputs"), "(top)"),
    ],
)
def test_a_job_file_that_breaks_the_schema_is_named_by_field(change: Any, where: str) -> None:
    job = example("example-job.json")
    change(job)

    assert any(line.startswith(where) for line in contract_errors(job, JOB_SCHEMA))


def test_an_ok_result_without_timings_breaks_the_contract_with_a_clear_error() -> None:
    document = example("example-result.json")
    del document["timings_ms"]

    with pytest.raises(DeviceError, match=r"breaks the runner contract: .*timings_ms"):
        parse_result(json.dumps(document).encode(), "3f9c2a7b1d0e4c55", "phone")


def test_a_result_that_is_not_json_says_so() -> None:
    with pytest.raises(DeviceError, match="not JSON"):
        parse_result(b'{"schema": "farm.ios.result/3", "job', "3f9c2a7b1d0e4c55", "phone")


@pytest.mark.parametrize(
    ("kind", "error"), [("thermal", DeviceTimeoutError), ("compile", CompileError), ("predict", DeviceError)]
)
def test_a_runner_reported_failure_becomes_its_farm_error(kind: str, error: type[Exception]) -> None:
    document = example("example-error-result.json")
    document["error"]["kind"] = kind

    with pytest.raises(error):
        parse_result(json.dumps(document).encode(), "3f9c2a7b1d0e4c55", "phone")


def test_a_result_for_another_job_is_refused() -> None:
    with pytest.raises(DeviceError, match="for job 3f9c2a7b1d0e4c55, not abc"):
        parse_result(json.dumps(example("example-result.json")).encode(), "abc", "phone")
