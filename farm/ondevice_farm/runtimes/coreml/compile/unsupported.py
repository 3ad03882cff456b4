"""The import stage of the CoreML compile: which nodes of a model the lowering cannot take."""

from __future__ import annotations

from ondevice_farm.runtimes.coreml.compile.fold import FoldedGraph
from ondevice_farm.runtimes.coreml.compile.lowering import NO_LOWERING, LowerFn, Unlowered
from ondevice_farm.runtimes.coreml.compile.onnx_graph import node_label


def find_unsupported(graph: FoldedGraph, table: dict[str, LowerFn]) -> list[Unlowered]:
    """Nodes left after folding whose op type has no lowering, in graph order.

    Checks op types only; the lowering itself also finds attributes it cannot take.
    """
    return [
        Unlowered(
            node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}",
            node_label(node),
            NO_LOWERING,
        )
        for node in graph.nodes
        if node.domain not in ("", "ai.onnx") or node.op_type not in table
    ]


def describe_unsupported(found: list[Unlowered], *, shown_per_op: int = 5) -> str:
    """One message listing every unsupported op type with its count, node names and why."""
    by_type: dict[str, list[Unlowered]] = {}
    for item in found:
        by_type.setdefault(item.op_type, []).append(item)
    lines = [f"{len(found)} node(s) of {len(by_type)} op type(s) cannot be lowered to CoreML:"]
    for op_type, items in sorted(by_type.items(), key=lambda entry: (-len(entry[1]), entry[0])):
        names = ", ".join(item.node for item in items[:shown_per_op])
        if len(items) > shown_per_op:
            names += f", ... ({len(items) - shown_per_op} more)"
        reasons = sorted({item.reason for item in items if item.reason != NO_LOWERING})
        why = f" ({'; '.join(reasons)})" if reasons else ""
        lines.append(f"  {op_type} x{len(items)}: {names}{why}")
    return "\n".join(lines)
