"""Where drift starts: planted divergences found on both host paths, none where there is none,
bisection within its run bound, and `farm diverge` end to end on a real host run."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from ondevice_farm.analysis.divergence import find_divergence
from ondevice_farm.analysis.intermediates import layer_points, run_with_outputs
from tests.report.chromium import CHROMIUM, open_page
from tests.report.conftest import SUBMIT_TIMEOUT_S, farm
from tests.report.diverging_models import PLANTED_NODE, overflowing_model, steady_model

#: the fp16 targets' SNR floor (ondevice_farm.analysis.numeric): the layer check uses the target's own
FP16_FLOOR_DB = 30.0


def _inputs() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)}


def _reference(model: onnx.ModelProto) -> tuple[list, dict[str, np.ndarray]]:
    points = layer_points(model)
    return points, run_with_outputs(model, _inputs(), [p.tensor for p in points])


def _ort_fp16(model: onnx.ModelProto, calls: list[list[str]]):  # type: ignore[no-untyped-def]
    def probe(names: list[str]) -> dict[str, np.ndarray]:
        calls.append(names)
        with np.errstate(over="ignore", invalid="ignore"):
            return run_with_outputs(model, _inputs(), names, fp16_storage=True)

    return probe


def _mil_fp16(path: Path):  # type: ignore[no-untyped-def]
    from ondevice_farm.runtimes.coreml.compile.layer_values import predicted_layer_values

    def probe(names: list[str]) -> dict[str, np.ndarray]:
        with np.errstate(over="ignore", invalid="ignore"):
            return predicted_layer_values(path, _inputs(), names, "fp16")

    return probe


def test_the_fp16_copy_on_host_ort_names_the_planted_op(tmp_path: Path) -> None:
    model = onnx.load(str(overflowing_model(tmp_path / "overflow.onnx")))
    points, reference = _reference(model)
    layers, first, method, runs = find_divergence(points, reference, _ort_fp16(model, []), FP16_FLOOR_DB)
    assert first is not None and first.point.node == PLANTED_NODE
    assert first.nonfinite > 0 and first.snr_db is None
    assert (method, runs) == ("all", 1)
    before = [layer for layer in layers if layer.point.depth < first.point.depth]
    assert before and all(not layer.diverged and layer.snr_db > 50 for layer in before)


def test_the_mil_executor_in_fp16_names_the_planted_op(tmp_path: Path) -> None:
    pytest.importorskip("coremltools")
    path = overflowing_model(tmp_path / "overflow.onnx")
    points, reference = _reference(onnx.load(str(path)))
    _, first, _, _ = find_divergence(points, reference, _mil_fp16(path), FP16_FLOOR_DB)
    assert first is not None and first.point.node == PLANTED_NODE and first.point.op_type == "Mul"


def test_a_model_that_stays_in_fp16_reports_no_divergence(tmp_path: Path) -> None:
    path = steady_model(tmp_path / "steady.onnx")
    model = onnx.load(str(path))
    points, reference = _reference(model)
    layers, first, _, _ = find_divergence(points, reference, _ort_fp16(model, []), FP16_FLOOR_DB)
    assert first is None and len(layers) == len(points) == 12
    # fp16 storage costs ~60 dB, well above the floor and well below bit-exact
    assert all(45 < (layer.snr_db or 0) < 80 for layer in layers)
    try:
        import coremltools  # noqa: F401
    except ImportError:
        return
    _, first_mil, _, _ = find_divergence(points, reference, _mil_fp16(path), FP16_FLOOR_DB)
    assert first_mil is None


def test_bisection_finds_the_planted_op_in_log2_runs(tmp_path: Path) -> None:
    model = onnx.load(str(overflowing_model(tmp_path / "overflow.onnx")))
    points, reference = _reference(model)
    calls: list[list[str]] = []
    layers, first, method, runs = find_divergence(
        points, reference, _ort_fp16(model, calls), FP16_FLOOR_DB, budget=2
    )
    assert method == "bisection" and first is not None and first.point.node == PLANTED_NODE
    assert runs == len(calls) <= 1 + math.ceil(math.log2(len(points)))
    assert len(calls[0]) == 2 and all(len(c) == 1 for c in calls[1:])
    assert first in layers  # the curve shows where it starts


def test_budget_below_two_is_refused(tmp_path: Path) -> None:
    model = onnx.load(str(steady_model(tmp_path / "steady.onnx")))
    points, reference = _reference(model)
    with pytest.raises(ValueError, match="budget"):
        find_divergence(points, reference, _ort_fp16(model, []), FP16_FLOOR_DB, budget=1)


def test_farm_diverge_on_a_host_run_with_coreml_predicted(tmp_path: Path) -> None:
    pytest.importorskip("coremltools")
    home = tmp_path / "home"
    model = overflowing_model(tmp_path / "overflow.onnx")
    submitted = farm(
        home,
        "submit",
        str(model),
        "--devices",
        "host-cpu",
        "--runs",
        "5",
        "--json",
        timeout_s=SUBMIT_TIMEOUT_S,
    )
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    run_id = json.loads(submitted.stdout)["run_id"]

    page = tmp_path / "layers.html"
    done = farm(
        home, "diverge", run_id, "--predict", "coreml/ane", "--json", "--html", str(page), timeout_s=180
    )
    assert done.returncode == 0, done.stderr[-2000:]
    curves = {c["label"]: c for c in json.loads(done.stdout)["curves"]}
    host, predicted = curves["host-cpu ort/cpu"], curves["coreml/ane (predicted)"]
    assert host["source"] == "measured" and host["first_divergent"] is None
    assert host["layers"] and all(layer["snr_db"] >= 80 for layer in host["layers"])
    assert predicted["source"] == "predicted" and predicted["precision"] == "fp16"
    assert predicted["first_divergent"]["node"] == PLANTED_NODE
    assert predicted["finding"].startswith(f"drift starts at {PLANTED_NODE} (Mul) on coreml/ane")

    text = farm(home, "diverge", run_id, "--predict", "coreml/ane", timeout_s=180)
    assert f"{PLANTED_NODE} <- first" in text.stdout

    # a window of the run's jobs, as `farm show`/`farm report` take it: past the only job, none is
    # measured (the prediction needs no job), and stderr says which were
    skipped = farm(
        home, "diverge", run_id, "--predict", "coreml/ane", "--json", "--offset", "1", timeout_s=180
    )
    assert skipped.returncode == 0, skipped.stderr[-2000:]
    labels = {c["label"] for c in json.loads(skipped.stdout)["curves"]}
    assert labels == {"coreml/ane (predicted)"}
    assert "jobs none of 1 (by finish time)" in skipped.stderr

    bad = farm(home, "diverge", run_id, "--predict", "ort/cpu")
    assert bad.returncode == 2 and "cannot predict ort/cpu" in bad.stderr

    if shutil.which(CHROMIUM) is None:
        return
    probes = {
        "section": "document.querySelector('#layers h2').textContent",
        "marked": "document.querySelectorAll('#layers circle.first-divergent').length",
        "label": "Array.from(document.querySelectorAll('#layers svg text')).map(t => t.textContent)"
        ".filter(t => t.startsWith('drift starts'))",
        "visible": "(function () { var r = document.querySelector('#layers svg').getBoundingClientRect();"
        " return r.width > 300 && r.height > 200; })()",
    }
    result = open_page(page, probes, screenshot=tmp_path / "layers.png")
    assert result.console_errors == []
    assert result.values["section"] == "Where drift starts"
    assert result.values["marked"] == 1 and result.values["label"] == [f"drift starts: {PLANTED_NODE}"]
    assert result.values["visible"] is True
