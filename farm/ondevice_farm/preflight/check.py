"""Pre-flight: which ops of a model will not run on each accelerator, before any device is asked.

ONNX Runtime partitions the graph after its basic optimisations (constant folding, Conv+BatchNorm
and similar fusions), so ONNX Runtime targets are checked on that graph, built here on the host;
CoreML targets are checked on the source graph, which the farm's lowering converts."""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ondevice_farm.errors import ModelError
from ondevice_farm.preflight.support import COREML_LOWERING_SOURCE, OpSupport, support_for
from ondevice_farm.targets import Target


@dataclass(frozen=True)
class GraphNode:
    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class Unsupported:
    node: str
    op_type: str
    reason: str


@dataclass
class Prediction:
    target: str
    #: False where there is no table to predict from (the target runs everything, or is unknown)
    known: bool
    source: str = ""
    nodes_checked: int = 0
    unsupported: list[Unsupported] = field(default_factory=list)
    #: ops taken only under a documented condition the pre-flight cannot check: (node, op, note)
    conditional: list[tuple[str, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: which graph `nodes_checked` counts: `model` (the ONNX file's nodes) or `ort-basic` (after
    #: ONNX Runtime's basic optimisations, the graph its partitioner hands to providers)
    graph_checked: str = "model"
    #: the ONNX file's own node count, so a `nodes_checked` of another graph can be read against it
    model_nodes: int = 0

    def conditional_by_rule(self) -> list[tuple[str, str, int]]:
        """(op type, condition, nodes) for each distinct conditional rule, most nodes first."""
        counts: dict[tuple[str, str], int] = {}
        for _, op_type, note in self.conditional:
            counts[(op_type, note)] = counts.get((op_type, note), 0) + 1
        return [(op, note, n) for (op, note), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "known": self.known,
            "source": self.source,
            "nodes_checked": self.nodes_checked,
            "unsupported": [vars(u) for u in self.unsupported],
            "unsupported_op_types": sorted({u.op_type for u in self.unsupported}),
            "conditional": [{"node": n, "op_type": o, "note": c} for n, o, c in self.conditional],
            "notes": self.notes,
            "graph_checked": self.graph_checked,
            "model_nodes": self.model_nodes,
        }


def graph_nodes(model_path: Path) -> list[GraphNode]:
    """The nodes of an ONNX model's main graph, in file (topological) order, unnamed ones named
    `<op_type>_<index>` (the report's alignment matches pre-flight nodes by these names)."""
    import onnx

    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except Exception as exc:
        raise ModelError(f"cannot read {model_path}: {exc}") from None
    return [
        GraphNode(n.name or f"{n.op_type}_{i}", n.op_type, tuple(n.input), tuple(n.output))
        for i, n in enumerate(model.graph.node)
    ]


def ort_basic_graph(model_path: Path) -> list[GraphNode] | None:
    """The graph ONNX Runtime hands to its execution providers (basic optimisations applied), or
    None where this host's ONNX Runtime cannot load the model."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="farm-preflight-") as tmp:
        optimised = Path(tmp) / "basic.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(optimised)
        options.log_severity_level = 3
        try:
            ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        except Exception:
            return None
        return graph_nodes(optimised)


def _check(
    nodes: list[GraphNode], support: OpSupport
) -> tuple[list[Unsupported], list[tuple[str, str, str]]]:
    taken: set[str] = set()
    unsupported: list[Unsupported] = []
    conditional: list[tuple[str, str, str]] = []
    for node in nodes:
        if support.takes(node.op_type):
            taken.add(node.name)
            note = support.ops[node.op_type]
            if note:
                conditional.append((node.name, node.op_type, note))
        elif node.op_type in support.fused_only:
            conditional.append((node.name, node.op_type, support.fused_only[node.op_type]))
        else:
            unsupported.append(
                Unsupported(
                    node.name,
                    node.op_type,
                    f"{node.op_type} is not in {support.provider}'s documented operator support",
                )
            )
    return unsupported, conditional


def coreml_lowering_check(model_path: Path) -> list[Unsupported] | None:
    """Every node the farm's CoreML lowering refuses, with its reason (attributes and shapes
    included, not only the op type); None where that lowering is not installed here."""
    try:
        from ondevice_farm.runtimes.coreml.compile.convert import (
            CoreMLOptions,
            list_unsupported,
            prepare_graph,
            quiet_coremltools,
        )

        # coremltools' import prints, off macOS, that it cannot load the CoreML framework: the
        # check never asks it to, so that is held back as `farm compile` holds it back
        with quiet_coremltools():
            _, graph = prepare_graph(model_path, None)
            failures = list_unsupported(graph, CoreMLOptions())
    except Exception:  # the lowering in progress or missing: the op-type table stands in
        return None
    return [Unsupported(f.node, f.op_type, f"the CoreML lowering refuses it: {f.reason}") for f in failures]


def predict(model_path: Path, targets: list[str] | list[Target]) -> list[Prediction]:
    """One prediction per target, in the order given."""
    source_nodes = graph_nodes(model_path)
    # Each is the same for every target that needs it, and costs a session build or a lowering.
    basic_graph = functools.cache(lambda: ort_basic_graph(model_path))
    lowering_check = functools.cache(lambda: coreml_lowering_check(model_path))
    predictions = []
    for item in targets:
        target = item if isinstance(item, Target) else Target.parse(item)
        support = support_for(target)
        if support is None:
            predictions.append(
                Prediction(
                    target.name,
                    known=False,
                    notes=[
                        "every op runs on this target's CPU"
                        if target.backend == "cpu"
                        else "no operator table for this target"
                    ],
                )
            )
            continue
        notes = []
        nodes = source_nodes
        graph_checked = "model"
        if support.graph == "ort-basic":
            basic = basic_graph()
            if basic is not None:
                nodes = basic
                graph_checked = "ort-basic"
                notes.append(
                    f"checked on the {len(basic)} nodes left of the model's {len(source_nodes)} after "
                    "ONNX Runtime's basic optimisations (BatchNormalization folded into Conv and the like): "
                    "the graph its partitioner hands to the provider"
                )
            else:
                notes.append("this host's ONNX Runtime could not load the model: checked on the source graph")
        unsupported, conditional = _check(nodes, support)
        if target.runtime == "coreml" and support.source == COREML_LOWERING_SOURCE:
            lowered = lowering_check()
            if lowered is not None:
                unsupported = lowered
            notes.append(
                "an op the lowering refuses stops the compile for this target; which ops run on the "
                "ANE, GPU or CPU only the device tells (MLComputePlan)"
            )
        predictions.append(
            Prediction(
                target.name,
                True,
                support.source,
                len(nodes),
                unsupported,
                conditional,
                notes,
                graph_checked=graph_checked,
                model_nodes=len(source_nodes),
            )
        )
    return predictions
