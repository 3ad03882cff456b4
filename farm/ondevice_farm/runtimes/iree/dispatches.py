"""The dispatches an IREE module runs, read from what `iree-compile` dumps beside it.

IREE's flow partitions the program into dispatch regions (a root op such as a convolution or a
matmul, with the elementwise ops before and after it fused in) and compiles each region into an
executable; the stream scheduler then issues one dispatch per region. Two dumps say what came
out: the scheduling statistics (`--iree-scheduling-dump-statistics-format=json`: the dispatch
count) and each executable's source (`--iree-hal-dump-executable-sources-to=DIR`, one `.mlir` per
executable). A dispatch's name is IREE's own summary of its root op (`dispatch_1_conv_8x16x16x3x3x3_f32`:
a convolution; `dispatch_0_slow_memcpy`: a copy). Which ONNX nodes it fused comes from the
locations the source keeps: the farm imports the model with each node's name as its location,
and the ops of a dispatch keep the locations of the nodes they were lowered from.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path
from typing import Any

#: an executable's entry point in a dumped source
_EXPORT = re.compile(r"hal\.executable\.export public @(\S+?)\s")
#: the trailing location of an op's line, and a `#locN = loc(...)` alias of one
_LINE_LOC = re.compile(r"loc\((.*)\)\s*$")
_LOC_ALIAS = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: the name from `dispatch_` on (the function's `main$async_` prefix left off)
_DISPATCH_NAME = re.compile(r"(dispatch_\d+.*)$")
#: a name's element types: `f32`, `i8xi8xi32` (a quantized matmul's operands and accumulator)
_ELEMENT_TYPES = re.compile(r"^(?:[fiu]\d+|bf16)(?:x(?:[fiu]\d+|bf16))*$")
#: an element type -> the precision word of the compile reports, the narrowest first
PRECISIONS = (("i8", "int8"), ("u8", "int8"), ("bf16", "bf16"), ("f16", "fp16"), ("f32", "fp32"))
#: dialects whose ops compute (the rest of a dispatch's body reads and writes its bindings)
_COMPUTE = ("linalg.", "arith.", "math.", "iree_linalg_ext.")
_NOT_COMPUTE = ("arith.constant",)


@dataclass(frozen=True)
class Dispatch:
    """One dispatch of the module, as the profile and the report name it."""

    #: IREE's name without the function prefix: `dispatch_1_conv_8x16x16x3x3x3_f32`
    name: str
    #: IREE's name for its root op: `conv`, `matmul`, `reduction`, `elementwise`, `slow_memcpy`
    kind: str
    #: the ONNX nodes whose ops it computes, in the graph's order
    nodes: tuple[str, ...]
    #: their ONNX op types, in the same order
    op_types: tuple[str, ...]
    #: nodes it only moves data for (a pad's copy), where it computes none
    moves_for: tuple[str, ...] = ()
    #: the element types its name ends with (`f32`, `i8xi8xi32`), "" where it names none
    element_types: str = ""

    @property
    def precision(self) -> str | None:
        """What it computes in (`int8` where any operand is 8-bit), None where the name says not."""
        types = set(self.element_types.split("x")) if self.element_types else set()
        return next((word for element, word in PRECISIONS if element in types), None)

    @property
    def label(self) -> str:
        """What it computes in ONNX's words (`Conv+Relu`), else IREE's kind (`slow_memcpy`)."""
        return "+".join(dict.fromkeys(self.op_types)) or self.kind

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "nodes": list(self.nodes),
            "op_types": list(self.op_types),
            "moves_for": list(self.moves_for),
            "element_types": self.element_types,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Dispatch:
        return cls(
            name=str(data["name"]),
            kind=str(data["kind"]),
            nodes=tuple(data["nodes"]),
            op_types=tuple(data["op_types"]),
            moves_for=tuple(data.get("moves_for", ())),
            element_types=str(data.get("element_types", "")),
        )


def short_name(name: str) -> str:
    """`main$async_dispatch_1_conv_8x16x16x3x3x3_f32` -> `dispatch_1_conv_8x16x16x3x3x3_f32`."""
    found = _DISPATCH_NAME.search(name)
    return found.group(1) if found else name


def dispatch_kind(name: str) -> str:
    """IREE's root-op word of a dispatch name: the words after `dispatch_N_` up to the first
    shape or dtype (`conv_8x16x16x3x3x3_f32` -> `conv`, `slow_memcpy` -> `slow_memcpy`)."""
    words = short_name(name).split("_")[2:]
    return "_".join(takewhile(lambda word: not any(c.isdigit() for c in word), words)) or "dispatch"


def element_types(name: str) -> str:
    """The element types a dispatch name ends with (`..._conv_8x16x16x3x3x3_f32` -> `f32`)."""
    last = short_name(name).split("_")[-1]
    return last if _ELEMENT_TYPES.match(last) else ""


def dispatch_count(statistics: Path) -> int:
    """The dispatches the scheduler issues per call, from the statistics' JSON dump."""
    data = json.loads(statistics.read_text(encoding="utf-8"))
    return int(data["stream-aggregate"]["execution"]["dispatch-count"])


def _locations(text: str, aliases: dict[str, str], known: dict[str, int]) -> list[str]:
    """The ONNX node names a location holds (a name, a fused list, an alias of either)."""
    text = aliases.get(text.strip(), text)
    return [name for name in _QUOTED.findall(text) if name in known]


def _body(source: str, export: str) -> list[str]:
    """The lines of the export's function: from `func.func @export(` to its `return`."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if f"func.func @{export}(" in line), None)
    if start is None:
        return []
    end = next((i for i in range(start, len(lines)) if lines[i].strip().startswith("return")), len(lines))
    return lines[start + 1 : end]


def read_dispatch(source: str, export: str, node_types: dict[str, str]) -> Dispatch:
    """One dispatch from its executable's dumped source; `node_types`: node name -> op type, in
    the graph's order."""
    order = {name: i for i, name in enumerate(node_types)}
    aliases = {m.group(1): m.group(2) for m in map(_LOC_ALIAS.match, source.splitlines()) if m}
    computed: set[str] = set()
    moved: set[str] = set()
    for line in _body(source, export):
        located = _LINE_LOC.search(line)
        if located is None:
            continue
        names = _locations(located.group(1), aliases, order)
        op = line.split("=", 1)[-1].strip() if " = " in line else line.strip()
        # a linalg op's region closes on `} -> tensor<...> loc(...)`: that line is the op's own
        compute = (op.startswith(_COMPUTE) and not op.startswith(_NOT_COMPUTE)) or op.startswith("} ->")
        (computed if compute else moved).update(names)
    nodes = tuple(sorted(computed, key=order.__getitem__))
    return Dispatch(
        name=short_name(export),
        kind=dispatch_kind(export),
        nodes=nodes,
        op_types=tuple(node_types[n] for n in nodes),
        moves_for=() if nodes else tuple(sorted(moved, key=order.__getitem__)),
        element_types=element_types(export),
    )


def read_dispatches(sources: Path, node_types: dict[str, str]) -> list[Dispatch]:
    """Every dispatch of the dumped executables, in dispatch order (IREE numbers them in the
    order the program issues them)."""
    found: list[Dispatch] = []
    for path in sorted(sources.glob("*.mlir")):
        text = path.read_text(encoding="utf-8")
        found += [read_dispatch(text, export, node_types) for export in _EXPORT.findall(text)]
    return sorted(found, key=lambda d: _ordinal(d.name))


def _ordinal(name: str) -> tuple[int, str]:
    number = name.split("_")[1] if name.startswith("dispatch_") else ""
    return (int(number) if number.isdigit() else 1 << 30, name)


def fusion_summary(dispatches: list[Dispatch]) -> dict[str, int]:
    """What the dispatches compute, counted: `{"Conv+Relu": 2, "Gemm": 1, "slow_memcpy": 1}`."""
    counts: dict[str, int] = {}
    for dispatch in dispatches:
        counts[dispatch.label] = counts.get(dispatch.label, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
