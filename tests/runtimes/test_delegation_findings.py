"""The report's findings on ExecuTorch and LiteRT jobs: what each delegate left, named; their
kernel counts are not set against ONNX Runtime's graph nodes."""

from __future__ import annotations

from typing import Any

from ondevice_farm.reports.compare import compare
from ondevice_farm.reports.findings import find
from ondevice_farm.reports.findings.compile import node_count_gap
from ondevice_farm.reports.findings.delegation import delegate_fallbacks
from tests.report.crafted import job, run


def _edge(target: str, delegation: dict[str, dict[str, int]], nodes_after: int) -> dict[str, Any]:
    """A crafted job of an ExecuTorch/LiteRT target whose compile report holds `delegation`."""
    document = job("host-cpu", target, nodes_after=nodes_after)
    delegate = "XNNPACK" if target.endswith("/xnnpack") else None
    document["compile"]["extra"] = {
        "delegate": delegate,
        "fallback_kernels": "portable" if target.startswith("executorch") else "builtin",
        "delegation": delegation,
        "artifact_bytes": 11560,
    }
    return document


EXECUTORCH = _edge(
    "executorch/xnnpack",
    {
        "aten.convolution.default": {"delegated": 2, "fallback": 0},
        "aten.mean.dim": {"delegated": 0, "fallback": 1},
    },
    nodes_after=3,
)
LITERT = _edge(
    "litert/xnnpack", {"CONV_2D": {"delegated": 2, "fallback": 0}, "MEAN": {"delegated": 1, "fallback": 0}}, 1
)


def test_the_op_a_delegate_left_is_named_against_one_that_took_everything() -> None:
    [finding] = delegate_fallbacks(compare(run(EXECUTORCH, LITERT)))
    assert finding.text == (
        "host-cpu executorch/xnnpack: XNNPACK took 2 of 3 nodes and left aten.mean.dim (1) on portable "
        "kernels; the delegate took every node on host-cpu litert/xnnpack"
    )
    assert finding.evidence["left"] == {"aten.mean.dim": 1}
    assert finding in find(compare(run(EXECUTORCH, LITERT)))


def test_no_delegate_asked_is_no_fallback() -> None:
    portable = _edge("executorch/portable", {"aten.mean.dim": {"delegated": 0, "fallback": 1}}, 1)
    assert delegate_fallbacks(compare(run(portable, LITERT))) == []


def test_kernel_counts_are_not_set_against_graph_nodes() -> None:
    onnx = job("host-cpu", "ort/cpu", nodes_after=41)
    assert node_count_gap(compare(run(onnx, LITERT, EXECUTORCH))) == []
    # two ONNX Runtime graphs still compare
    assert node_count_gap(compare(run(onnx, job("host-cpu", "ort/xnnpack", nodes_after=10))))
