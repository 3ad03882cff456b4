"""The import stage of the CoreML compile: which ops of a model the lowering cannot take."""

from __future__ import annotations

from collections import Counter

from farm.compile.coreml.fold import FoldedGraph
from farm.compile.coreml.lowering import LowerFn
from farm.compile.coreml.onnx_graph import node_label


def find_unsupported(graph: FoldedGraph, table: dict[str, LowerFn]) -> list[tuple[str, str]]:
    """(op type, node name) for every node left after folding that has no lowering, in graph order."""
    return [
        (
            node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}",
            node_label(node),
        )
        for node in graph.nodes
        if node.domain not in ("", "ai.onnx") or node.op_type not in table
    ]


def describe_unsupported(found: list[tuple[str, str]], *, shown_per_op: int = 5) -> str:
    """One message listing every unsupported op type with its count and node names."""
    by_type: dict[str, list[str]] = {}
    for op_type, name in found:
        by_type.setdefault(op_type, []).append(name)
    counts = Counter({op: len(names) for op, names in by_type.items()})
    lines = [f"{len(found)} node(s) of {len(by_type)} op type(s) cannot be lowered to CoreML:"]
    for op_type, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        names = by_type[op_type]
        shown = ", ".join(names[:shown_per_op]) + (
            f", ... ({count - shown_per_op} more)" if count > shown_per_op else ""
        )
        lines.append(f"  {op_type} x{count}: {shown}")
    return "\n".join(lines)
