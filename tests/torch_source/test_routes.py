"""Three small real architectures through both routes, against the checkpoint's eager outputs.

ONNX route: torch.onnx.export -> ONNX Runtime (measured here) and -> the farm's CoreML lowering;
PyTorch route: coremltools' frontend. Both CoreML programs run in the host MIL executor in fp16:
predictions, compared with eager fp32.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "torch", reason="PyTorch source tests need torch: pip install 'ondevice-farm[torch]' (the CPU wheel)"
)
pytest.importorskip(
    "coremltools", reason="the CoreML routes need coremltools: pip install 'ondevice-farm[coreml]'"
)

from ondevice_farm.errors import ModelError, UsageError
from ondevice_farm.reference import reference_outputs
from ondevice_farm.torch_source.ingest import TorchSource, ingest_torch
from ondevice_farm.torch_source.routes import export_check, route_study

from .architectures import save_exported, save_traced

ARCHITECTURES = ("cnn", "encoder", "upsampler")
#: fp16 storage between ops, against fp32 eager: what the host executor predicts for these sizes
MIN_PREDICTED_SNR_DB = 45.0
#: the export computes in fp32 like eager; only kernel order differs
MIN_EXPORT_SNR_DB = 100.0


def _ingest(path: Path, cache: Path, **kwargs: Any) -> TorchSource:
    return ingest_torch(
        path,
        shapes=kwargs.get("shapes", {}),
        example_inputs=kwargs.get("example_inputs"),
        seed=0,
        export_dir=cache / "exports",
        reference_dir=cache / "references",
    )


HAS_ONNXSCRIPT = importlib.util.find_spec("onnxscript") is not None


@pytest.fixture(scope="module")
def all_studied(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("routes")
    done: dict[str, Any] = {}
    for name in ARCHITECTURES:
        try:
            source = _ingest(save_exported(name, root / f"{name}.pt2"), root)
        except ModelError as exc:
            if HAS_ONNXSCRIPT:
                raise
            # without onnxscript only the TorchScript exporter is left, and it cannot export every
            # traced program (the encoder's attention): that is the export's refusal, not a farm bug
            done[name] = exc
            continue
        on_ort = reference_outputs(
            source.info.path, source.info.sha256, source.inputs, root / "onnx-references"
        )
        done[name] = (source, export_check(source, on_ort), route_study(source, "fp16"))
    return done


@pytest.fixture
def studied(all_studied: dict[str, Any], request: pytest.FixtureRequest) -> dict[str, Any]:
    refused = {n: v for n, v in all_studied.items() if isinstance(v, ModelError)}
    wanted = request.node.callspec.params.get("name") if hasattr(request.node, "callspec") else None
    if wanted in refused or (wanted is None and refused):
        pytest.skip(
            "onnxscript is not installed and the TorchScript exporter refused: "
            f"{next(iter(refused.values()))}"
        )
    return all_studied


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_the_onnx_export_matches_eager_on_onnx_runtime(studied: dict[str, Any], name: str) -> None:
    source, check, _ = studied[name]
    assert source.checkpoint.kind == "exported_program"
    assert source.export.exporter in ("dynamo", "torchscript")
    assert (source.export.exporter == "dynamo") == (not source.export.fallbacks)
    (output,) = check["outputs"].values()
    assert check["provenance"] == "measured"
    assert output["snr_db"] >= MIN_EXPORT_SNR_DB, output


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_both_coreml_routes_predict_close_to_eager(studied: dict[str, Any], name: str) -> None:
    _, _, study = studied[name]
    for route in ("onnx", "torch"):
        predicted = study["predicted"][route]
        assert predicted["provenance"] == "predicted"
        assert "error" not in predicted, predicted
        (output,) = predicted["outputs"].values()
        # fp16 really was simulated: the prediction is not bit-exact, and it is close
        assert output["max_abs"] > 0 and output["snr_db"] >= MIN_PREDICTED_SNR_DB, (route, output)
    assert study["onnx"]["precision"] == study["torch"]["precision"] == "fp16"
    assert study["onnx"]["mil_ops"] > 0 and study["torch"]["mil_ops"] > 0
    # the ONNX route hands back what the ONNX model declares; the divergence sentence says so where not
    assert study["onnx"]["output_dtypes"] == ["float32"]
    if study["torch"]["output_dtypes"] != ["float32"]:
        assert "from the PyTorch route" in study["divergence"]


def test_the_route_comparison_names_the_ops_only_one_route_builds(studied: dict[str, Any]) -> None:
    _, _, study = studied["encoder"]
    differences = study["op_differences"]
    assert differences, "the two converters built the same encoder program: nothing left to compare"
    for op, counts in differences.items():
        assert study["onnx"]["op_types"].get(op, 0) == counts["onnx"]
        assert study["torch"]["op_types"].get(op, 0) == counts["torch"]
    assert "MIL ops" in study["divergence"]


def test_coremltools_refusals_and_version_warning_are_kept(studied: dict[str, Any]) -> None:
    import coremltools
    from packaging.version import Version

    for name in ARCHITECTURES:
        torch_route = studied[name][2]["torch"]
        # a refused ExportedProgram is converted again as a traced module, and the refusal kept
        assert (torch_route["frontend"] == "traced") == bool(torch_route["refusals"]), torch_route
    import torch

    tested = Version(getattr(coremltools._deps, "_TORCH_MAX_VERSION", "0"))
    warned = studied["cnn"][2]["torch"]["warnings"]
    assert bool(warned) == (Version(torch.__version__.split("+")[0]) > tested)


def test_a_torchscript_checkpoint_needs_its_input_shapes(tmp_path: Path) -> None:
    checkpoint = tmp_path / "upsampler.pt"
    example = save_traced("upsampler", checkpoint)
    with pytest.raises(UsageError, match="does not store its input shapes"):
        _ingest(checkpoint, tmp_path)
    np.savez(tmp_path / "inputs.npz", x=example)
    source = _ingest(checkpoint, tmp_path, example_inputs=tmp_path / "inputs.npz")
    assert source.checkpoint.kind == "torchscript"
    assert source.export.exporter == "torchscript"
    assert np.array_equal(source.inputs["x"], example)
    study = route_study(source, "fp16")
    assert study["torch"]["frontend"] == "traced"
    (output,) = study["predicted"]["torch"]["outputs"].values()
    assert output["snr_db"] >= MIN_PREDICTED_SNR_DB
