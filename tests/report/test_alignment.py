"""Op alignment on crafted profiles: compiled partitions, placement without a profile."""

from __future__ import annotations

from pathlib import Path

from ondevice_farm.reports.alignment import align, describe, source_nodes
from ondevice_farm.reports.compare import compare
from tests.report.crafted import job, run
from tests.report.recorded import conv_resize_model

NNAPI, CPU = "NnapiExecutionProvider", "CPUExecutionProvider"


def test_nodes_in_a_compiled_partition_share_its_time(tmp_path: Path) -> None:
    nodes = source_nodes(conv_resize_model(tmp_path / "m.onnx"))
    profiled = job(
        ops=[
            ("NnapiExecutionProvider_Nnapi_1234_0_0", "Nnapi_1234_0", NNAPI, 800.0),
            ("/Resize", "Resize", CPU, 200.0),
        ],
        fallbacks=("/Resize",),
    )
    profiled["compile"]["node_placement"] = {"/conv/Conv": NNAPI, "/Resize": CPU}
    [column] = compare(run(profiled)).columns
    conv, resize = (row.cells[column.label] for row in align(nodes, [column]).rows)
    assert (conv.kernel, conv.backend, conv.time_us, conv.certainty) == (
        "NnapiExecutionProvider_Nnapi_1234_0_0",
        "NNAPI",
        800.0,
        "partition",
    )
    assert (resize.backend, resize.certainty) == ("CPU", "exact")
    assert (
        describe(conv) == "NnapiExecutionProvider_Nnapi_1234_0_0 [partition] on NNAPI, 0.800 ms (partition)"
    )


def test_kernels_that_match_no_source_node_are_listed(tmp_path: Path) -> None:
    nodes = source_nodes(conv_resize_model(tmp_path / "m.onnx"))
    profiled = job(
        target="ort/cpu",
        ops=[
            ("/conv/Conv", "Conv", CPU, 100.0),
            ("MemcpyToHost", "Memcpy", CPU, 1.0),
            ("/Resize", "Resize", CPU, 50.0),
        ],
    )
    [column] = compare(run(profiled)).columns
    alignment = align(nodes, [column])
    assert [k["name"] for k in alignment.untraced[column.label]] == ["MemcpyToHost"]
    assert [r.cells[column.label].certainty for r in alignment.rows] == ["exact", "exact"]


def test_the_source_model_is_found_by_its_hash_in_the_artifact_store(tmp_path: Path) -> None:
    from ondevice_farm.artifacts import ArtifactStore
    from ondevice_farm.reports.document import locate_model

    model = conv_resize_model(tmp_path / "m.onnx")
    sha, stored = ArtifactStore(tmp_path / "artifacts").put(model, "model.onnx")
    moved = {"model": {"name": "m", "sha256": sha, "path": str(tmp_path / "gone.onnx")}}
    assert locate_model(moved) is None
    assert locate_model(moved, artifacts_root=tmp_path / "artifacts") == stored
    assert locate_model({"model": {"sha256": sha, "path": str(model)}}) == model
