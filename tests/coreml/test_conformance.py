"""The lowering against ONNX's own conformance cases (onnx.backend.test), whose expected outputs come
from ONNX's reference implementations, not from ONNX Runtime.

`conformance_cases.txt` names the cases that must match (two per lowered op type); a few cases
outside the lowering's limits must stop with a clear CompileError, never a traceback or a wrong answer.
Cases missing from the installed onnx are skipped.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from ondevice_farm.errors import CompileError
from ondevice_farm.runtimes.coreml.compile import predict_drift
from tests.coreml.harness import FP32_RELATIVE_TOLERANCE

MUST_MATCH = (Path(__file__).parent / "conformance_cases.txt").read_text().split()

#: outside the lowering's documented limits: each must be one CompileError naming the reason
MUST_REFUSE = {
    "test_unsqueeze_three_axes": "rank <= 5",
}

#: inputs that are parameters in a real model (weights, pads, scales): given as constants here
_PARAMETER_OPS = {
    "Resize", "Clip", "Pad", "Conv", "ConvTranspose", "BatchNormalization", "InstanceNormalization",
    "LayerNormalization", "GroupNormalization", "PRelu", "QuantizeLinear", "DequantizeLinear",
}  # fmt: skip


@pytest.fixture(scope="module")
def cases() -> dict[str, Any]:
    collect = pytest.importorskip("onnx.backend.test.case.node").collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators overflow casts on purpose
        return {case.name: case for case in collect(None)}


def _as_array(value: Any) -> np.ndarray:
    return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def _prepare(case: Any, tmp_path: Path) -> tuple[Path, dict[str, np.ndarray], list[np.ndarray]]:
    """The case's model with parameter inputs turned into initializers, its feeds and expected outputs."""
    inputs, outputs = case.data_sets[0]
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    feeds = {vi.name: _as_array(v) for vi, v in zip(model.graph.input, inputs, strict=True)}
    parameters = {
        name
        for node in model.graph.node
        for index, name in enumerate(node.input)
        if name in feeds and index >= 1 and (feeds[name].dtype.kind in "iu" or node.op_type in _PARAMETER_OPS)
    }
    for name in parameters:
        model.graph.initializer.append(onnx.numpy_helper.from_array(feeds.pop(name), name))
    kept = [vi for vi in model.graph.input if vi.name not in parameters]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    path = tmp_path / "case.onnx"
    onnx.save(model, str(path))
    return path, feeds, [_as_array(v) for v in outputs]


@pytest.mark.parametrize("name", MUST_MATCH)
def test_conformance_case_matches(name: str, cases: dict[str, Any], tmp_path: Path) -> None:
    if name not in cases:
        pytest.skip(f"{name} is not in this onnx version's conformance cases")
    path, feeds, expected = _prepare(cases[name], tmp_path)
    got = list(predict_drift(path, feeds, precision="fp32").values())
    assert len(got) == len(expected)
    for actual, reference in zip(got, expected, strict=True):
        assert actual.shape == reference.shape
        ref = reference.astype(np.float64)
        act = actual.astype(np.float64)
        # equal infinities and NaN on both sides agree (Cast and Reduce cases hold them)
        same = (act == ref) | (np.isnan(act) & np.isnan(ref))
        act, ref = np.where(same, 0.0, act), np.where(same, 0.0, ref)
        scale = max(float(np.max(np.abs(ref), initial=0.0)), 1e-6)
        error = float(np.max(np.abs(act - ref), initial=0.0)) / scale
        assert error <= FP32_RELATIVE_TOLERANCE, f"relative error {error:.2e}"


@pytest.mark.parametrize("name", sorted(MUST_REFUSE))
def test_conformance_case_outside_the_limits_is_refused_clearly(
    name: str, cases: dict[str, Any], tmp_path: Path
) -> None:
    if name not in cases:
        pytest.skip(f"{name} is not in this onnx version's conformance cases")
    path, feeds, _ = _prepare(cases[name], tmp_path)
    with pytest.raises(CompileError, match=MUST_REFUSE[name].replace("(", r"\(")):
        predict_drift(path, feeds, precision="fp32")
