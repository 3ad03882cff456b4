"""Op-level alignment: each source ONNX node, and what it became on each target.

Runtimes rename what they fuse, so the mapping is inferred, and each cell says how sure it is:
- `exact`: the kernel is named after the node or after a tensor the node produces
  (ONNX Runtime keeps such names: `Clip_3.out_nchwc` is the NCHWc kernel that ends at `Clip_3`);
- `fused`: the node is on the chain of single-consumer producers that leads to such a kernel,
  back to the kernel's own op type (Conv -> BatchNormalization -> Clip ran as one Conv);
- `partition`: the compiler placed the node on a provider that ran it in compiled partitions
  (NNAPI, CoreML, QNN), whose profile shows only the partition;
- `uncertain`: the node vanished and its nearest profiled producer is the best guess;
- `placed`: only the placement was recorded (the device's log, or the compiler), no per-op time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ondevice_farm.op_rows import op_time_us
from ondevice_farm.preflight.check import GraphNode, graph_nodes
from ondevice_farm.reports.compare import Column, backend_name

NAME_BOUNDARIES = frozenset("._:/-")
#: ops that are kernels of their own: a vanished one is missing from the profile, not fused into
#: its producer (activations, adds and casts are what runtimes fold into the op before them)
KERNEL_OPS = frozenset(
    {
        "conv",
        "convtranspose",
        "gemm",
        "matmul",
        "linear",
        "lstm",
        "gru",
        "rnn",
        "attention",
        "multiheadattention",
        "maxpool",
        "averagepool",
        "globalaveragepool",
        "globalmaxpool",
        "resize",
        "softmax",
        "layernormalization",
        "einsum",
        "gather",
        "concat",
        "reshape",
        "transpose",
    }
)
#: kernels of compiled partitions are named `<Provider>ExecutionProvider_<NAME>_<hash>_<n>_<n>`
PARTITION_MARKERS = ("ExecutionProvider_",)

#: the report aligns the same nodes, under the same names, that the pre-flight checks
SourceNode = GraphNode
source_nodes = graph_nodes


@dataclass(frozen=True)
class Cell:
    kernel: str
    op_type: str
    backend: str
    #: the kernel's time per run by the op table's statistic (`op_time_us`); None: not recorded
    time_us: float | None
    certainty: str  # exact | fused | partition | uncertain | placed | absent


@dataclass
class AlignmentRow:
    sources: list[SourceNode]
    #: column label -> what the sources became there
    cells: dict[str, Cell]
    #: column label -> sources in this row whose mapping there is only a guess
    uncertain: dict[str, list[str]] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return " + ".join(s.name for s in self.sources)


@dataclass
class Alignment:
    rows: list[AlignmentRow]
    #: column label -> kernels no source node could be traced to
    untraced: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [
                {
                    "sources": [s.name for s in row.sources],
                    "op_types": [s.op_type for s in row.sources],
                    "targets": {label: vars(cell) for label, cell in row.cells.items()},
                    "uncertain": row.uncertain,
                }
                for row in self.rows
            ],
            "untraced": self.untraced,
        }


def op_key(op_type: str) -> str:
    """`ios17.conv`, `Conv` -> `conv`: Core ML's MIL op types next to ONNX's."""
    return op_type.rsplit(".", 1)[-1].lower()


def _prefix_match(kernel: str, keys: dict[str, str]) -> str | None:
    """The source node whose name or output tensor is the longest name-prefix of `kernel`."""
    best: tuple[int, str] | None = None
    for key, node in keys.items():
        if not kernel.startswith(key):
            continue
        at_boundary = len(kernel) == len(key) or kernel[len(key)] in NAME_BOUNDARIES
        if at_boundary and (best is None or len(key) > best[0]):
            best = (len(key), node)
    return best[1] if best else None


def _is_partition(kernel: dict[str, Any]) -> bool:
    return any(marker in str(kernel.get("name", "")) for marker in PARTITION_MARKERS)


class _Graph:
    def __init__(self, nodes: list[SourceNode]) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.order = {n.name: i for i, n in enumerate(nodes)}
        self.producer = {t: n.name for n in nodes for t in n.outputs}
        self.consumers: dict[str, list[str]] = {}
        for n in nodes:
            for t in n.inputs:
                self.consumers.setdefault(t, []).append(n.name)
        self.keys = {n.name: n.name for n in nodes}
        self.keys.update({t: n.name for n in nodes for t in n.outputs if t})

    def sole_producer(self, name: str) -> str | None:
        """The producer of the node's first activation input, if the node is its only consumer."""
        for tensor in self.nodes[name].inputs:
            producer = self.producer.get(tensor)
            if producer is not None:
                return producer if self.consumers.get(tensor) == [name] else None
        return None

    def producers(self, name: str) -> list[str]:
        found = [self.producer[t] for t in self.nodes[name].inputs if t in self.producer]
        return sorted(found, key=lambda p: -self.order[p])


def _align_column(graph: _Graph, column: Column) -> tuple[dict[str, Cell], list[dict[str, Any]]]:
    cells: dict[str, Cell] = {}
    untraced: list[dict[str, Any]] = []
    partitions: dict[str, list[dict[str, Any]]] = {}
    for kernel in column.ops:
        backend = backend_name(str(kernel.get("provider") or "?"))
        if _is_partition(kernel):
            partitions.setdefault(backend, []).append(kernel)
            continue
        anchor = _prefix_match(str(kernel["name"]), graph.keys)
        if anchor is None:
            untraced.append(kernel)
            continue
        cell = Cell(
            str(kernel["name"]),
            str(kernel.get("op_type", "")),
            backend,
            op_time_us(kernel) or 0.0,
            "exact",
        )
        cells[anchor] = cell
        # walk back along the fused chain to the node of the kernel's own op type
        current = anchor
        while op_key(graph.nodes[current].op_type) != op_key(cell.op_type):
            producer = graph.sole_producer(current)
            if producer is None or producer in cells:
                break
            cells[producer] = Cell(cell.kernel, cell.op_type, backend, cell.time_us, "fused")
            current = producer
    node_placement = {
        str(k): backend_name(str(v)) for k, v in column.compile.get("node_placement", {}).items()
    }
    for backend, kernels in partitions.items():
        total = sum(op_time_us(k) or 0.0 for k in kernels)
        name = kernels[0]["name"] if len(kernels) == 1 else f"{len(kernels)} {backend} partitions"
        for node, placed in node_placement.items():
            if placed == backend and node in graph.nodes and node not in cells:
                cells[node] = Cell(str(name), "partition", backend, total, "partition")
    profiled = {name for name, cell in cells.items() if cell.certainty in ("exact", "fused")}
    for name in sorted(graph.nodes, key=lambda n: graph.order[n]):
        if name in cells:
            continue
        guess = None
        if column.ops and op_key(graph.nodes[name].op_type) not in KERNEL_OPS:
            guess = next((p for p in graph.producers(name) if p in profiled), None)
        if guess is not None:
            source = cells[guess]
            cells[name] = Cell(source.kernel, source.op_type, source.backend, source.time_us, "uncertain")
        elif name in node_placement:
            cells[name] = Cell(name, graph.nodes[name].op_type, node_placement[name], None, "placed")
        elif column.ops:
            cells[name] = Cell("", "", "", None, "absent")
    return cells, untraced


def align(nodes: list[SourceNode], columns: list[Column]) -> Alignment:
    """Rows of source nodes; consecutive nodes that became one kernel on every column share a row."""
    graph = _Graph(nodes)
    per_column: dict[str, dict[str, Cell]] = {}
    untraced: dict[str, list[dict[str, Any]]] = {}
    for column in columns:
        if not column.ok:
            continue
        per_column[column.label], leftover = _align_column(graph, column)
        if leftover:
            untraced[column.label] = leftover
    rows: list[AlignmentRow] = []
    for node in nodes:
        cells = {label: cells[node.name] for label, cells in per_column.items() if node.name in cells}
        previous = rows[-1] if rows else None
        if (
            previous is not None
            and cells
            and all(
                label in previous.cells and cell.kernel and cell.kernel == previous.cells[label].kernel
                for label, cell in cells.items()
            )
            and set(cells) == set(previous.cells)
        ):
            previous.sources.append(node)
            for label, cell in cells.items():
                if cell.certainty == "exact":
                    previous.cells[label] = cell
                elif cell.certainty == "uncertain":
                    previous.uncertain.setdefault(label, []).append(node.name)
            continue
        rows.append(AlignmentRow([node], cells))
    return Alignment(rows, untraced)


def describe(cell: Cell) -> str:
    """`FusedConv on CPU, 0.412 ms (fused)`: one cell of the alignment as text."""
    if cell.certainty == "absent":
        return "not in the profile (folded or removed)"
    time = ", time not recorded" if cell.time_us is None else f", {cell.time_us / 1000:.3f} ms"
    kind = "" if cell.certainty == "exact" else f" ({cell.certainty})"
    return f"{cell.kernel} [{cell.op_type}] on {cell.backend}{time}{kind}"
