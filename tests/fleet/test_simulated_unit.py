"""A simulated unit's job without Ray (`SimulatedAgent`), and the nightly's refusal of simulated units
as a suite states it (`allow_simulated`). The lab on a cluster: tests/fleet/test_simulated_lab.py."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ondevice_farm.errors import UsageError
from ondevice_farm.nightly.suite import parse_suite, refuse_simulated
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import AgentSettings, RunRequest
from ondevice_farm_agents.simulated.agent import SimulatedAgent


def model(path: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "m", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def request(path: Path, target: str = "ort/xnnpack") -> RunRequest:
    inputs = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)}
    return RunRequest(path, "ab" * 32, Target.parse(target), inputs, warmup=0, runs=100)


def test_a_job_lasts_its_drawn_time_and_returns_a_profiled_synthetic_run(tmp_path: Path) -> None:
    agent = SimulatedAgent(
        AgentSettings(extra={"simulated_units": "2", "simulated_job_s": "0.3", "simulated_job_spread": "0"})
    )
    unit = agent.discover()[1]
    began = time.monotonic()
    run = agent.run(unit, request(model(tmp_path / "m.onnx")))
    assert time.monotonic() - began >= 0.3
    assert len(run.ops) == 200 and len(run.samples_ms) == 100 and len(run.placement) == 200
    assert {op.source for op in run.ops} == {"synthetic"} and run.latency_source == "synthetic"
    assert 0 < list(run.placement.values()).count("CPUExecutionProvider") < 100
    expected = 1 / (1 + np.exp(-request(tmp_path / "m.onnx").inputs["x"]))
    assert np.allclose(run.outputs["y"], expected, atol=1e-5) and not np.array_equal(
        run.outputs["y"], expected
    )
    # the same model and target: the same op rows from one job to the next
    assert [op.name for op in agent.run(unit, request(tmp_path / "m.onnx")).ops] == [
        op.name for op in run.ops
    ]


def test_an_ort_cpu_job_has_no_fallbacks() -> None:
    agent = SimulatedAgent(AgentSettings(extra={"simulated_units": "1", "simulated_job_s": "0.01"}))
    run = agent.run(agent.discover()[0], request(Path("/nonexistent.onnx"), "ort/cpu"))
    assert set(run.placement.values()) == {"CPUExecutionProvider"} and run.outputs  # random outputs


def test_a_suite_on_simulated_units_is_refused_unless_it_or_the_command_line_asks() -> None:
    data = {"name": "s", "devices": ["simulated:a-0", "host-cpu"], "models": ["m.onnx"]}
    suite = parse_suite(data, Path("s.yaml"))
    with pytest.raises(UsageError, match="simulated units") as refused:
        refuse_simulated(suite, {"simulated"})
    assert "--allow-simulated" in refused.value.hint
    refuse_simulated(suite, {"simulated"}, allowed=True)
    refuse_simulated(parse_suite({**data, "allow_simulated": True}, Path("s.yaml")), {"simulated"})
    refuse_simulated(parse_suite({**data, "devices": ["host-cpu"]}, Path("s.yaml")), {"simulated"})
    with pytest.raises(UsageError, match="allow_simulated must be true or false"):
        parse_suite({**data, "allow_simulated": "yes"}, Path("s.yaml"))
