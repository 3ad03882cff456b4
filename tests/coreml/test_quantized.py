"""QDQ models (onnxruntime.quantization.quantize_static) on CoreML: kept 8-bit or folded to float.

The lowered program runs on the host MIL executor against ONNX Runtime's int8 result (the QDQ
graph run as written, and ORT's fused int8 kernels) and against the float model it came from.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner

from ondevice_farm.analysis.numeric import diff_output
from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.cli.main import cli
from ondevice_farm.reports.compare import compare
from ondevice_farm.reports.findings.compile import precision_differs
from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift
from ondevice_farm.runtimes.coreml.compile.kernels_quant import dequantize, quantize
from ondevice_farm.runtimes.ort.compile import compile_ort
from ondevice_farm.targets import Target
from tests.coreml.harness import FP32_RELATIVE_TOLERANCE, ort_outputs, relative_error
from tests.coreml.onnx_models import resnet_blocks
from tests.coreml.quantized_models import ARCHITECTURES, feeds, quantize_qdq
from tests.report.crafted import job, run

ct = pytest.importorskip("coremltools")

CASES = [(arch, per_channel) for arch in sorted(ARCHITECTURES) for per_channel in (True, False)]
IDS = [f"{arch}-{'per_channel' if pc else 'per_tensor'}" for arch, pc in CASES]


@pytest.fixture(scope="module", params=CASES, ids=IDS)
def qdq(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    arch, per_channel = request.param
    float_path, qdq_path = quantize_qdq(
        ARCHITECTURES[arch](), tmp_path_factory.mktemp(f"{arch}{int(per_channel)}"), per_channel=per_channel
    )
    return arch, float_path, qdq_path


def _ort_fused(path: Path, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """ONNX Runtime at its default level: QDQ fused into QLinearConv/QGemm int8 kernels."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, inputs)[0])


def test_kept_program_matches_onnx_runtime_int8(qdq: tuple[str, Path, Path]) -> None:
    arch, float_path, qdq_path = qdq
    inputs = feeds(onnx.load(str(qdq_path)), seed=7)
    as_written = next(iter(ort_outputs(qdq_path, inputs).values()))
    fused = _ort_fused(qdq_path, inputs)
    kept = next(iter(predict_drift(qdq_path, inputs, precision="fp32", quantization="keep").values()))
    # The same arithmetic as ORT's: equal to one of its two int8 executions (the QDQ graph node by
    # node, or its fused QLinearConv/QGemm kernels) up to float summation order. That order can put
    # an activation on the other side of a rounding boundary: a step apart, not more.
    assert min(relative_error(as_written, kept), relative_error(fused, kept)) <= FP32_RELATIVE_TOLERANCE
    # close to the execution it matches; ORT's two executions themselves differ by rounding steps
    # (the per-channel encoder's fused kernels sit ~28 dB from the QDQ graph with this onnxruntime)
    assert max(diff_output(ort_int8, kept).snr_db for ort_int8 in (as_written, fused)) > 30.0, arch
    reference = next(iter(ort_outputs(float_path, inputs).values()))
    quantization = diff_output(reference, kept)
    assert 10.0 < quantization.snr_db < 80.0, f"{arch}: {quantization.snr_db:.1f} dB against the float model"


def test_fp16_prediction_of_the_kept_program_stays_near_int8(qdq: tuple[str, Path, Path]) -> None:
    arch, _, qdq_path = qdq
    inputs = feeds(onnx.load(str(qdq_path)), seed=8)
    int8 = next(iter(ort_outputs(qdq_path, inputs).values()))
    fp16 = next(iter(predict_drift(qdq_path, inputs, precision="fp16", quantization="keep").values()))
    drift = diff_output(int8, fp16)
    # fp16 storage may move an activation across a quantization step: a few steps at most
    assert drift.max_abs > 0.0
    assert drift.snr_db > 20.0, f"{arch}: {drift.snr_db:.1f} dB"


def test_folded_to_float_program_has_no_quantized_op(qdq: tuple[str, Path, Path], tmp_path: Path) -> None:
    arch, float_path, qdq_path = qdq
    artifact = compile_coreml(qdq_path, Target.parse("coreml/gpu"), tmp_path, quantization="float")
    report = artifact.report
    assert report.extra["quantization"]["mode"] == "float"
    assert not any("quant" in op for op in report.op_types_after)
    assert all("int8" not in counts for counts in report.op_precision.values())
    assert report.precision == "fp16"
    inputs = feeds(onnx.load(str(qdq_path)), seed=9)
    folded = next(iter(predict_drift(qdq_path, inputs, precision="fp32", quantization="float").values()))
    reference = next(iter(ort_outputs(float_path, inputs).values()))
    assert diff_output(reference, folded).snr_db > 10.0, arch


def test_qdq_resnet_compiles_for_the_neural_engine_with_8bit_weights(tmp_path: Path) -> None:
    _, qdq_path = quantize_qdq(resnet_blocks(width=64), tmp_path / "models", per_channel=True)
    kept = compile_coreml(qdq_path, Target.parse("coreml/ane"), tmp_path / "keep")
    folded = compile_coreml(qdq_path, Target.parse("coreml/ane"), tmp_path / "float", quantization="float")
    report = kept.report
    assert report.precision == "int8"
    assert report.op_precision["conv"] == {"int8": 6}
    assert report.op_precision["matmul"] == {"int8": 1}
    assert report.extra["quantization"]["weights"].startswith("8-bit in the package")
    assert report.op_types_after["constexpr_affine_dequantize"] == 7
    assert report.op_types_after["quantize"] > 0 and report.op_types_after["dequantize"] > 0
    weights = report.extra["weight_bytes"]
    # the conv and classifier weights are int8; what is left in float is scales, biases and norm params
    assert weights["int8"] > 4 * sum(n for dtype, n in weights.items() if dtype != "int8")
    assert report.extra["package_bytes"] < 0.6 * folded.report.extra["package_bytes"]
    assert folded.report.op_precision["conv"] == {"fp16": 6}
    # the package as saved holds the constexpr ops: the 8-bit weights are in it, not folded back
    spec = ct.models.MLModel(str(kept.path), skip_model_load=True).get_spec()
    main = spec.mlProgram.functions["main"]
    saved = {op.type for op in main.block_specializations[main.opset].operations}
    assert "constexpr_affine_dequantize" in saved


@pytest.mark.parametrize(
    ("deployment", "weight_op", "activations"),
    [("iOS16", "constexpr_affine_dequantize", False), ("iOS18", "constexpr_blockwise_shift_scale", True)],
)
def test_deployment_target_picks_the_mil_quantization_ops(
    deployment: str, weight_op: str, activations: bool, qdq: tuple[str, Path, Path], tmp_path: Path
) -> None:
    arch, _, qdq_path = qdq
    if arch != "resnet":
        pytest.skip("one architecture is enough for the op choice")
    artifact = compile_coreml(
        qdq_path, Target.parse("coreml/ane"), tmp_path, minimum_deployment_target=deployment
    )
    ops = artifact.report.op_types_after
    assert ops.get(weight_op, 0) > 0
    assert ("quantize" in ops) is activations
    inputs = feeds(onnx.load(str(qdq_path)), seed=10)
    out = next(
        iter(predict_drift(qdq_path, inputs, precision="fp32", minimum_deployment_target=deployment).values())
    )
    int8 = next(iter(ort_outputs(qdq_path, inputs).values()))
    if activations:
        # the same program as iOS17's but for the weight op: ORT's QDQ result, up to summation order
        assert min(relative_error(int8, out), relative_error(_ort_fused(qdq_path, inputs), out)) <= (
            FP32_RELATIVE_TOLERANCE
        )
    else:
        # iOS 16 has no activation quantize op: activations stay float, only the weights are 8-bit
        assert diff_output(int8, out).snr_db > 20.0


def test_quantize_rounds_half_to_even_and_saturates() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0], np.float32)
    (q,) = quantize({"input": x, "scale": np.float32(1.0), "zero_point": np.int8(0), "output_dtype": "int8"})
    np.testing.assert_array_equal(q, np.array([0, 2, 2, 0, -2, 127, -128], np.int8))
    (u,) = quantize(
        {"input": x, "scale": np.float32(0.5), "zero_point": np.uint8(10), "output_dtype": "uint8"}
    )
    np.testing.assert_array_equal(u, np.array([11, 13, 15, 9, 7, 255, 0], np.uint8))
    (back,) = dequantize({"input": u, "scale": np.float32(0.5), "zero_point": np.uint8(10)})
    np.testing.assert_array_equal(back, np.array([0.5, 1.5, 2.5, -0.5, -1.5, 122.5, -5.0], np.float32))


def test_per_channel_kernels_follow_the_axis() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    scale = np.array([1.0, 2.0], np.float32)
    zero = np.array([0, 1], np.int8)
    (q,) = quantize({"input": x, "scale": scale, "zero_point": zero, "axis": 0, "output_dtype": "int8"})
    # row 1: 3/2, 4/2, 5/2 = 1.5, 2, 2.5 -> 2, 2, 2 (half to even), + 1
    np.testing.assert_array_equal(q, np.array([[0, 1, 2], [3, 3, 3]], np.int8))


def test_each_target_reports_its_op_precision_and_the_difference_is_a_finding(
    qdq: tuple[str, Path, Path], tmp_path: Path
) -> None:
    arch, _, qdq_path = qdq
    if arch != "resnet":
        pytest.skip("one architecture is enough for the report")
    store = ArtifactStore(tmp_path / "store")
    cpu = compile_ort(qdq_path, Target.parse("ort/cpu"), store).report
    nnapi = compile_ort(qdq_path, Target.parse("ort/nnapi"), store).report
    kept = compile_coreml(qdq_path, Target.parse("coreml/ane"), tmp_path / "keep").report
    folded = compile_coreml(
        qdq_path, Target.parse("coreml/gpu"), tmp_path / "float", quantization="float"
    ).report
    # ORT fuses conv and its classifier into QLinearConv/QGemm; batch norm stays float between
    # conversions on the CPU, and is a QDQ unit for NNAPI, which runs those quantized
    assert cpu.op_precision["conv"] == {"int8": 6} and cpu.op_precision["matmul"] == {"int8": 1}
    assert cpu.op_precision["norm"] == {"fp32": 6}
    assert cpu.op_precision["pool"] == {"int8": 1}  # MaxPool on uint8, its QDQ pair dropped
    assert nnapi.op_precision["norm"] == {"int8": 6}
    assert kept.op_precision["conv"] == {"int8": 6}
    assert folded.op_precision["conv"] == {"fp16": 6}
    jobs = []
    for label, report in (("cpu", cpu), ("ane", kept), ("gpu", folded)):
        document = job(label, report.target)
        document["compile"] = report.to_dict()
        jobs.append(document)
    findings = {f.evidence["op_group"]: f for f in precision_differs(compare(run(*jobs)))}
    assert (
        findings["conv"].text
        == "gpu coreml/gpu runs conv in fp16; cpu ort/cpu, ane coreml/ane run conv in int8"
    )
    assert findings["norm"].evidence["precision"] == {
        "cpu ort/cpu": "fp32",
        "ane coreml/ane": "int8",
        "gpu coreml/gpu": "fp16",
    }


def test_farm_compile_prints_each_targets_op_precision_and_the_package_size(
    qdq: tuple[str, Path, Path], tmp_path: Path
) -> None:
    arch, _, qdq_path = qdq
    if arch != "resnet":
        pytest.skip("one architecture is enough for the command line")
    home = ["--home", str(tmp_path / "home")]
    args = ["compile", str(qdq_path), "--targets", "ort/cpu,coreml/ane"]
    result = CliRunner().invoke(cli, [*home, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.strip().startswith("op precision:") and "conv int8" in line for line in lines)
    assert any(line.strip().startswith("package ") and "int8" in line for line in lines)
    folded = CliRunner().invoke(cli, [*home, *args, "--coreml-quantization", "float", "--json"])
    reports = {t["target"]: t["report"] for t in json.loads(folded.stdout)["targets"]}
    assert reports["coreml/ane"]["op_precision"]["conv"] == {"fp16": 6}
    assert reports["ort/cpu"]["op_precision"]["conv"] == {"int8": 6}
    bad = CliRunner().invoke(cli, [*home, *args, "--coreml-quantization", "int4"])
    assert bad.exit_code != 0
