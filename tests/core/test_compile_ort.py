from __future__ import annotations

from pathlib import Path

import onnx

from ondevice_farm.artifacts import ArtifactStore, sha256_file
from ondevice_farm.compile import compile_for_target
from ondevice_farm.targets import Target


def test_cpu_compile_reports_fusions_and_placement(model: Path, tmp_path: Path) -> None:
    artifact = compile_for_target(model, Target.parse("ort/cpu"), ArtifactStore(tmp_path / "a"))
    report = artifact.report
    assert report.nodes_before == 61 and report.nodes_after < report.nodes_before
    changes = {c.op_type: (c.before, c.after) for c in report.fusions}
    assert changes["BatchNormalization"] == (20, 0)  # folded into the convolutions
    assert report.placement == {"CPUExecutionProvider": sum(report.op_types_before.values()) - 20}
    assert report.partitions == 1 and report.fallback_ops == []
    assert report.precision == "fp32"
    # a float model: every op group fp32 (FusedConv is the conv group)
    assert report.op_precision["conv"] == {"fp32": report.op_types_after.get("FusedConv", 0)
                                           + report.op_types_after.get("Conv", 0)}  # fmt: skip
    assert all(set(counts) == {"fp32"} for counts in report.op_precision.values())
    # content-addressed: the artifact sits under its own hash and compiling again reuses it
    assert artifact.sha256 == sha256_file(artifact.path)
    again = compile_for_target(model, Target.parse("ort/cpu"), ArtifactStore(tmp_path / "a"))
    assert again.path == artifact.path
    onnx.checker.check_model(str(artifact.path))


def test_accelerator_missing_here_ships_a_portable_model_and_says_so(model: Path, tmp_path: Path) -> None:
    artifact = compile_for_target(model, Target.parse("ort/nnapi"), ArtifactStore(tmp_path / "a"))
    shipped = onnx.load(str(artifact.path))
    # no contrib (com.microsoft) fused kernels that NNAPI could not take
    assert all(node.domain in ("", "ai.onnx") for node in shipped.graph.node)
    assert any("NnapiExecutionProvider is not installed on this host" in n for n in artifact.report.notes)
    assert artifact.report.placement == {}  # only the device can tell
