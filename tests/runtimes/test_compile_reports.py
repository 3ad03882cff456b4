"""`farm compile` of a PyTorch checkpoint for ExecuTorch and LiteRT: what each delegate took."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="PyTorch source tests need torch: pip install 'ondevice-farm[torch]'")

from ..core.conftest import farm, farm_json
from ..torch_source.architectures import save_exported

EDGE_TARGETS = "executorch/xnnpack,executorch/portable,litert/xnnpack,litert/cpu"


@pytest.fixture(scope="module")
def compiles_once() -> Iterator[list[str]]:
    """While the module runs, a compile of a checkpoint (by its sha256) for a target with the same
    options that this module compiled before returns that artifact: the text test asks `farm compile`
    for targets the JSON fixture built from the same checkpoint file, and lowering them again would
    check nothing new (same program, same compiler) at a tenth of the module's time. Yields the
    targets (`sha256:target`) actually compiled, in order."""
    import ondevice_farm.compile as compile_package

    real = compile_package.compile_for_target
    built: dict[str, Any] = {}
    compiled: list[str] = []

    def once(model_path: Path, target: Any, store: Any, **options: Any) -> Any:
        source = options.get("source")
        if source is None:  # an ONNX model: its own compile every time, as without this fixture
            return real(model_path, target, store, **options)
        rest = sorted((name, repr(value)) for name, value in options.items() if name != "source")
        key = f"{source.sha256}:{target.name}:{rest}"
        if key not in built:
            built[key] = real(model_path, target, store, **options)
            compiled.append(f"{source.sha256}:{target.name}")
        return built[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compile_package, "compile_for_target", once)
        yield compiled


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's folder: `<name>.pt2`, each architecture's checkpoint, and `home`, the farm home."""
    return tmp_path_factory.mktemp("runtimes")


@pytest.fixture(scope="module")
def compiled(root: Path, compiles_once: list[str]) -> dict[str, dict[str, Any]]:
    """Both test architectures compiled for the four ExecuTorch/LiteRT targets and ort/cpu, once."""
    out = {}
    for name in ("cnn", "encoder"):
        checkpoint = save_exported(name, root / f"{name}.pt2")
        document = farm_json(root / "home", "compile", str(checkpoint), "-t", f"{EDGE_TARGETS},ort/cpu")
        out[name] = {entry["target"]: entry for entry in document["targets"]}
    return out


def _delegation(entry: dict[str, Any]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = entry["report"]["extra"]["delegation"]
    return table


def test_xnnpack_leaves_the_cnn_mean_on_a_portable_kernel(compiled: dict[str, dict[str, Any]]) -> None:
    entry = compiled["cnn"]["executorch/xnnpack"]
    report = entry["report"]
    table = _delegation(entry)
    assert table["aten.convolution.default"] == {"delegated": 2, "fallback": 0}
    assert table["aten.mean.dim"] == {"delegated": 0, "fallback": 1}
    assert report["placement"]["XNNPACK"] >= 4 and report["placement"]["portable"] == 1
    # the delegated convolutions, then the mean on a portable kernel, then the delegated linear
    assert report["partitions"] == 3
    assert [report["node_placement"][n] for n in report["fallback_ops"]] == ["portable"]
    assert report["op_types_after"]["executorch_call_delegate"] == 2
    assert report["op_types_before"]["aten.convolution.default"] == 2
    assert "left on portable kernels: aten.mean.dim 1" in report["notes"][0]
    extra = report["extra"]
    assert extra["converter_versions"]["executorch"] == "1.5.1"
    assert extra["artifact_bytes"] > 1000 and Path(entry["artifact"]).name == "model.pte"


def test_portable_runs_every_node_on_portable_kernels(compiled: dict[str, dict[str, Any]]) -> None:
    report = compiled["cnn"]["executorch/portable"]["report"]
    assert set(report["placement"]) == {"portable"}
    assert report["partitions"] == 1 and report["fallback_ops"] == []  # no delegate: nothing fell back
    assert report["extra"]["delegate"] is None and report["extra"]["partitioner"] == "none"


def test_litert_xnnpack_takes_the_cnn_whole(compiled: dict[str, dict[str, Any]]) -> None:
    entry = compiled["cnn"]["litert/xnnpack"]
    report = entry["report"]
    assert set(report["placement"]) == {"XNNPACK"} and report["fallback_ops"] == []
    assert report["partitions"] == 1 and report["op_types_after"] == {"DELEGATE": 1}
    # litert-torch lays the convolutions out NHWC: two TRANSPOSEs around them, in the delegate too
    assert report["extra"]["tflite_ops"]["TRANSPOSE"] == 2 and report["extra"]["tflite_ops"]["MEAN"] == 1
    assert report["extra"]["converter_versions"]["litert-torch"] == "0.10.0"
    assert report["extra"]["converter_versions"]["ai-edge-litert"] == "2.3.0"
    cpu = compiled["cnn"]["litert/cpu"]
    # one flatbuffer for both: the interpreter decides the delegate at load
    assert cpu["sha256"] == entry["sha256"] and set(cpu["report"]["placement"]) == {"builtin"}
    assert cpu["report"]["op_types_after"] == report["extra"]["tflite_ops"]
    assert Path(entry["artifact"]).name == "model.tflite"


def test_the_encoder_compiles_for_every_runtime(compiled: dict[str, dict[str, Any]]) -> None:
    targets = compiled["encoder"]
    for name in ("executorch/xnnpack", "executorch/portable", "litert/xnnpack", "litert/cpu", "ort/cpu"):
        assert "error" not in targets[name], targets[name]
    delegated = sum(row["delegated"] for row in _delegation(targets["executorch/xnnpack"]).values())
    assert delegated > 0
    assert targets["executorch/xnnpack"]["report"]["extra"]["artifact_bytes"] > 0


def test_compile_prints_the_runtimes_side_by_side(
    compiled: dict[str, dict[str, Any]], compiles_once: list[str], root: Path
) -> None:
    # the fixture's cnn checkpoint: its artifacts for these two targets are reused (`compiles_once`)
    before = list(compiles_once)
    text = farm(
        root / "home", "compile", str(root / "cnn.pt2"), "-t", "executorch/xnnpack,litert/xnnpack"
    ).stdout
    assert compiles_once == before  # nothing lowered twice
    assert "XNNPACK took" in text and "aten.mean.dim" in text
    assert "artifact" in text and "KiB" in text


def test_a_torchscript_checkpoint_is_converted_to_a_program_first(tmp_path: Path) -> None:
    import numpy as np

    from ..torch_source.architectures import save_traced

    checkpoint = tmp_path / "upsampler.pt"
    np.savez(tmp_path / "inputs.npz", x=save_traced("upsampler", checkpoint))
    document = farm_json(
        tmp_path / "home",
        "compile",
        str(checkpoint),
        "--example-inputs",
        str(tmp_path / "inputs.npz"),
        "-t",
        "executorch/xnnpack",
    )
    (entry,) = document["targets"]
    assert document["model"]["source"]["format"] == "torchscript"
    # TS2EPConverter's program: both convolutions (and the transposed one) reach XNNPACK
    assert entry["report"]["extra"]["delegation"]["aten.convolution.default"] == {
        "delegated": 2,
        "fallback": 0,
    }
