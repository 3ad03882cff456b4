"""The Python API without a device: values and frames from a recorded run, the evidence a failed
latency budget shows, and the CLI's commands going through the API's functions (one path)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

import ondevice_farm as farm
from ondevice_farm.python_api import comparing, compiling, submitting
from ondevice_farm.python_api.frames import JOB_COLUMNS, OP_COLUMNS, SAMPLE_COLUMNS

from .conftest import farm as farm_cli

RECORDED = Path(__file__).parents[1] / "report" / "fixtures" / "host" / "tinynet_busy_host.json"


def recorded_run() -> farm.Run:
    return farm.Run.of(json.loads(RECORDED.read_text()))


def test_a_run_is_frozen_typed_values_and_frames_with_the_documents_names() -> None:
    document = json.loads(RECORDED.read_text())
    run = recorded_run()
    [job] = run.jobs
    raw = document["jobs"][0]
    assert job.latency is not None and job.latency.p50_ms == raw["latency_ms"]["p50"]
    assert len(job.latency.samples_ms) == len(raw["latency_ms"]["samples"])
    assert job.load_ms == raw["load_ms"] and job.reference_passed is True and job.ok
    assert run.job("host-cpu", "ort/cpu") is job
    with pytest.raises(KeyError, match="has no job of pixel8 ort/cpu"):
        run.job("pixel8", "ort/cpu")
    with pytest.raises(TypeError):
        run.document["status"] = "changed"  # type: ignore[index]
    with pytest.raises(AttributeError):
        job.status = "changed"  # type: ignore[misc]

    jobs = run.jobs_frame()
    assert list(jobs.columns) == list(JOB_COLUMNS) and len(jobs) == 1
    assert jobs.loc[0, "p50_ms"] == raw["latency_ms"]["p50"] and jobs.loc[0, "target"] == "ort/cpu"
    ops = run.ops_frame()
    assert list(ops.columns) == list(OP_COLUMNS) and len(ops) == len(raw["ops"])
    assert set(ops["backend"]) == {r["provider"] for r in raw["ops"]}
    samples = run.samples_frame()
    assert list(samples.columns) == list(SAMPLE_COLUMNS)
    assert list(samples["latency_ms"]) == raw["latency_ms"]["samples"]

    shown = run._repr_html_()
    assert f"{raw['latency_ms']['p50']:.3f}" in shown and "passed" in shown and "<table>" in shown
    assert "<!DOCTYPE html>" in run.to_html()


def test_frames_without_pandas_say_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(farm.FarmError, match="data frames need pandas") as caught:
        recorded_run().jobs_frame()
    assert "ondevice-farm[frames]" in caught.value.hint


def pair_row(verdict: str, ratio: float, low: float, high: float) -> dict[str, Any]:
    return {"requested": "host-cpu", "target": "ort/cpu", "status": "ok", "verdict": verdict,
            "ratio": ratio, "interval": [low, high], "rounds": 7}  # fmt: skip


def test_a_slower_candidate_fails_the_budget_with_its_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    document = {"settings": {"baseline": "a.onnx", "candidate": "b.onnx"},
                "comparisons": [pair_row("slower", 1.93, 1.71, 2.18)]}  # fmt: skip
    monkeypatch.setattr(
        "ondevice_farm.python_api.testing.compare", lambda *a, **k: farm.Comparison.of(document)
    )
    with pytest.raises(farm.SlowerError) as caught:
        farm.assert_not_slower("a.onnx", "b.onnx", devices="host-cpu")
    assert "b.onnx is slower than a.onnx on 1 pair(s)" in str(caught.value)
    assert "host-cpu ort/cpu: slower: B/A 1.930 [1.710, 2.180] after 7 rounds" in str(caught.value)
    assert isinstance(caught.value, AssertionError)
    document["comparisons"] = [pair_row("same", 1.0, 0.98, 1.02)]
    assert farm.assert_not_slower("a.onnx", "b.onnx").pair("host-cpu", "ort/cpu").verdict == "same"
    document["comparisons"] = [pair_row("inconclusive", 1.02, 0.9, 1.2)]
    farm.assert_not_slower("a.onnx", "b.onnx")
    with pytest.raises(AssertionError, match="no verdict within the budget"):
        farm.assert_not_slower("a.onnx", "b.onnx", allow_inconclusive=False)


def test_a_model_proto_is_written_for_the_call_and_shapes_take_either_form(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu4", [x], [y]))
    with submitting.model_file(model) as path:
        assert path.name == "relu4.onnx" and onnx.load(str(path)).graph.name == "relu4"
    assert not path.exists()
    with pytest.raises(farm.FarmError, match="cannot submit a dict"), submitting.model_file({}):
        pass
    assert submitting.shape_texts({"x": (1, 3, 224, 224)}) == ("x=1x3x224x224",)
    assert submitting.shape_texts(["x=1x3"]) == ("x=1x3",)


def test_the_cli_submits_compiles_and_compares_through_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One implementation: each command's work is the API function's (replaced here by a fake)."""
    seen: list[str] = []
    recorded: dict[str, Any] = json.loads(RECORDED.read_text())

    def fake_submit(model: Path, options: Any, place: farm.Farm, **kwargs: Any) -> dict[str, Any]:
        seen.append(f"submit {model.name} {options.devices} {place.home}")
        return recorded

    def fake_compile(model: Path, wanted: list[Any], **kwargs: Any) -> compiling.CompileOutcome:
        seen.append(f"compile {model.name} {[t.name for t in wanted]}")
        return compiling.CompileOutcome({"model": {"name": "m", "sha256": "0"}, "targets": []}, None, (), 1)

    def fake_compare(request: Any, place: farm.Farm, progress: Any) -> dict[str, Any]:
        seen.append(f"compare {request.baseline} {request.candidate} {request.max_rounds}")
        return {"settings": {}, "comparisons": [pair_row("same", 1.0, 0.98, 1.02)]}

    monkeypatch.setattr(submitting, "submit_document", fake_submit)
    monkeypatch.setattr(compiling, "compile_document", fake_compile)
    monkeypatch.setattr(comparing, "compare_document", fake_compare)
    home = tmp_path / "home"
    assert farm_cli(home, "submit", "m.onnx", "-d", "pixel8", "--embedded", "--json").exit_code == 0
    assert farm_cli(home, "compile", "m.onnx", "-t", "ort/cpu,ort/xnnpack", "--json").exit_code == 0
    assert farm_cli(home, "compare", "a.onnx", "b.onnx", "--max-rounds", "9", "--json").exit_code == 0
    assert seen == [
        f"submit m.onnx pixel8 {home}",
        "compile m.onnx ['ort/cpu', 'ort/xnnpack']",
        "compare a.onnx b.onnx 9",
    ]


def test_import_ondevice_farm_loads_nothing_heavy() -> None:
    """Every farm command imports the package: the API's names load on first use only."""
    import subprocess

    heavy = "('numpy', 'onnx', 'ray', 'pandas')"
    probe = f"import sys, ondevice_farm; print(sorted(m for m in {heavy} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
