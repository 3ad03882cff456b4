"""ONNX models whose weights live in external data files beside them (`onnx.save_model(...,
save_as_external_data=True)`; what exporters write past protobuf's 2 GiB and often before).

Such a model is its `.onnx` file *and* those files: its identity (the sha256 every cache and
baseline is keyed by) covers both, and wherever the farm copies, ships or uploads it, the files go
along at the relative locations the model names.

Which files a model names is read from its protobuf wire format here, with the standard library
only: the thin client (`farm submit` to a running `farm serve`) asks it of every model it uploads,
and importing onnx (and through it ml_dtypes and numpy) took 0.67 s of a profiled 0.88 s submit
(issue 39). The reader walks only what can hold a tensor, the way `onnx.load_model(...,
load_external_data=True)` looks for external data (`onnx.external_data_helper._get_all_tensors`):
the graph's initializers, its nodes' tensor attributes, the subgraphs of GRAPH and GRAPHS attributes
(If, Loop, Scan), and the nodes of the model's functions. Every other field (a tensor's raw_data,
shapes, types) is stepped over by its length, never read: the file is mapped, so a model with a
gigabyte of weights inline costs the pages of its few thousand field headers. Where the reader
cannot vouch for its answer (bytes protobuf would refuse, group fields, nesting near protobuf's
depth limit, names that are not UTF-8), onnx decides, as it always did. What it steps over it does
not check: a model damaged there, which onnx refuses whole (and so named no files), names its
files here; its run fails on loading it either way. Nor does it stop at protobuf's 2 GiB.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ondevice_farm.errors import ModelError

#: the ONNX TensorProto.DataLocation value of a tensor whose bytes are in an external file
_EXTERNAL = 1

# Field numbers and enum values of onnx/onnx.proto (proto2), as onnx 1.23 has them: a released
# .proto never renumbers a field.
_MODEL_GRAPH, _MODEL_FUNCTIONS = 7, 25  # ModelProto.graph, .functions
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5  # GraphProto.node, .initializer
_FUNCTION_NODE = 7  # FunctionProto.node
_NODE_ATTRIBUTE = 5  # NodeProto.attribute
_ATTR_T, _ATTR_G, _ATTR_TENSORS, _ATTR_GRAPHS, _ATTR_TYPE = 5, 6, 10, 11, 20  # AttributeProto
_TYPE_GRAPH, _TYPE_GRAPHS = 5, 10  # AttributeProto.AttributeType.GRAPH, .GRAPHS
_ATTRIBUTE_TYPES = frozenset(range(15))  # AttributeType's values: UNDEFINED = 0 to TYPE_PROTOS = 14
_DATA_LOCATIONS = frozenset({0, _EXTERNAL})  # TensorProto.DataLocation: DEFAULT, EXTERNAL
_TENSOR_NAME, _TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 8, 13, 14  # TensorProto
_ENTRY_KEY, _ENTRY_VALUE = 1, 2  # StringStringEntryProto

_MODEL_FIELDS = frozenset({_MODEL_GRAPH, _MODEL_FUNCTIONS})
_GRAPH_FIELDS = frozenset({_GRAPH_NODE, _GRAPH_INITIALIZER})
_ATTRIBUTE_FIELDS = frozenset({_ATTR_T, _ATTR_G, _ATTR_TENSORS, _ATTR_GRAPHS, _ATTR_TYPE})
_TENSOR_FIELDS = frozenset({_TENSOR_NAME, _TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION})
_ENTRY_FIELDS = frozenset({_ENTRY_KEY, _ENTRY_VALUE})

# Wire types (protobuf's encoding guide); 3 and 4 (groups) the reader leaves to onnx.
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
#: messages nested deeper than this are left to onnx (protobuf refuses past 100)
_MAX_DEPTH = 64

#: (start, end) of a message's bytes; a singular message field may occur several times, and
#: protobuf merges the occurrences into one message, so it is a list of spans
Span = tuple[int, int]


def external_files(model_path: Path) -> tuple[str, ...]:
    """The external data files `model_path` names, relative to its directory, sorted; () for a
    model without any and for anything that is not an `.onnx` file.

    ModelError when a named file is missing, or its location leaves the model's directory (an
    absolute path or `..`: ONNX Runtime refuses those too, and the farm would copy files the
    user never meant to send)."""
    if model_path.suffix.lower() != ".onnx" or not model_path.is_file():
        return ()
    try:
        tensors = _read_external_tensors(model_path)
    except _Undecided:
        tensors = _external_tensors_by_onnx(model_path)
    return tuple(sorted({_checked(model_path, name, location) for name, location in tensors}))


def _checked(model_path: Path, tensor: str, location: str) -> str:
    relative = PurePosixPath(location.replace("\\", "/"))
    if not location or relative.is_absolute() or ".." in relative.parts:
        raise ModelError(
            f"{model_path}: tensor {tensor!r} keeps its data at {location!r}, outside the model's folder",
            hint="save it with its external data beside it: onnx.save_model(..., location='NAME.data')",
        )
    if not (model_path.parent / relative).is_file():
        raise ModelError(
            f"{model_path}: its external data file {location} is missing (tensor {tensor!r})",
            hint="keep the .data file(s) the exporter wrote beside the .onnx file",
        )
    return relative.as_posix()


def _external_tensors_by_onnx(model_path: Path) -> list[tuple[str, str]]:
    """(name, location) of each external tensor, as onnx finds them (slow: imports onnx)."""
    import onnx
    from onnx.external_data_helper import _get_all_tensors

    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except Exception:  # protobuf's DecodeError and friends: not a model, so no external files
        return []
    found = []
    for tensor in _get_all_tensors(model):
        if tensor.data_location != _EXTERNAL:
            continue
        entries = {entry.key: entry.value for entry in tensor.external_data}
        found.append((tensor.name, entries.get("location", "")))
    return found


class _Undecided(Exception):
    """The wire reader cannot vouch for an answer here: onnx decides."""


def _read_external_tensors(model_path: Path) -> list[tuple[str, str]]:
    """(name, location) of each external tensor, in the order onnx finds them, from the wire."""
    with model_path.open("rb") as handle:
        try:
            buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # empty, or a file system that maps nothing: read it
            return _Wire(handle.read()).external_tensors()
        with buffer:
            return _Wire(buffer).external_tensors()


@dataclass
class _Attribute:
    """What an attribute holds that onnx looks into: its tensors, the subgraphs its type names."""

    t: list[Span] | None = None
    tensors: list[Span] = field(default_factory=list)
    graphs: list[_Graph] = field(default_factory=list)


@dataclass
class _Graph:
    """A graph's initializers, and those of its nodes' attributes that hold tensors or graphs."""

    initializers: list[Span] = field(default_factory=list)
    attributes: list[_Attribute] = field(default_factory=list)


class _Wire:
    """A serialized ModelProto, read as onnx.proto lays it out."""

    def __init__(self, buffer: bytes | mmap.mmap) -> None:
        self.buffer = buffer

    def external_tensors(self) -> list[tuple[str, str]]:
        graph: list[Span] = []
        functions: list[_Graph] = []
        for number, wire, start, end in self._fields((0, len(self.buffer)), _MODEL_FIELDS):
            if number == _MODEL_GRAPH and wire == _LEN:
                graph.append((start, end))
            elif number == _MODEL_FUNCTIONS and wire == _LEN:
                nodes = self._repeated([(start, end)], _FUNCTION_NODE)
                functions.append(_Graph(attributes=self._attributes(nodes, 2)))
        main = self._graph(graph, 1)
        # onnx's order: every initializer (subgraphs' too), then the attributes' tensors
        tensors = [*_initializers(main), *_attribute_tensors(main)]
        for function in functions:
            tensors.extend(_attribute_tensors(function))
        return [found for spans in tensors if (found := self._external(spans)) is not None]

    def _graph(self, spans: list[Span], depth: int) -> _Graph:
        """The graph whose bytes are at `spans` (several: protobuf merges them into one)."""
        if depth > _MAX_DEPTH:
            raise _Undecided
        nodes: list[Span] = []
        initializers: list[Span] = []
        for span in spans:
            for number, wire, start, end in self._fields(span, _GRAPH_FIELDS):
                if number == _GRAPH_NODE and wire == _LEN:
                    nodes.append((start, end))
                elif number == _GRAPH_INITIALIZER and wire == _LEN:
                    initializers.append((start, end))
        return _Graph(initializers, self._attributes(nodes, depth))

    def _repeated(self, spans: list[Span], wanted: int) -> list[Span]:
        """The messages of the repeated field `wanted` in the messages at `spans`, in order."""
        return [
            (start, end)
            for span in spans
            for number, wire, start, end in self._fields(span, frozenset({wanted}))
            if wire == _LEN
        ]

    def _attributes(self, nodes: list[Span], depth: int) -> list[_Attribute]:
        """The attributes that hold tensors or graphs of `nodes` (of a graph or function at
        `depth`), in order."""
        found = []
        for span in self._repeated(nodes, _NODE_ATTRIBUTE):
            attribute = self._attribute(span, depth + 2)
            if attribute.t is not None or attribute.tensors or attribute.graphs:
                found.append(attribute)
        return found

    def _attribute(self, span: Span, depth: int) -> _Attribute:
        kind = 0
        t: list[Span] = []
        tensors: list[Span] = []
        g: list[Span] = []
        graphs: list[Span] = []
        for number, wire, start, end in self._fields(span, _ATTRIBUTE_FIELDS):
            if number == _ATTR_TYPE and wire == _VARINT:
                kind = _enum(start, _ATTRIBUTE_TYPES, kind)
            elif wire != _LEN:
                continue
            elif number == _ATTR_T:
                t.append((start, end))
            elif number == _ATTR_TENSORS:
                tensors.append((start, end))
            elif number == _ATTR_G:
                g.append((start, end))
            elif number == _ATTR_GRAPHS:
                graphs.append((start, end))
        attribute = _Attribute(t=t or None, tensors=tensors)
        if kind == _TYPE_GRAPH and g:
            attribute.graphs.append(self._graph(g, depth + 1))
        elif kind == _TYPE_GRAPHS:
            attribute.graphs.extend(self._graph([span], depth + 1) for span in graphs)
        return attribute

    def _external(self, spans: list[Span]) -> tuple[str, str] | None:
        """(name, location) of the tensor at `spans` if its data is external, else None."""
        name = b""
        location = 0
        entries: list[Span] = []
        for span in spans:
            for number, wire, start, end in self._fields(span, _TENSOR_FIELDS):
                if number == _TENSOR_DATA_LOCATION and wire == _VARINT:
                    location = _enum(start, _DATA_LOCATIONS, location)
                elif number == _TENSOR_NAME and wire == _LEN:
                    name = self.buffer[start:end]
                elif number == _TENSOR_EXTERNAL_DATA and wire == _LEN:
                    entries.append((start, end))
        if location != _EXTERNAL:
            return None
        values: dict[str, str] = {}
        for entry in entries:
            key = value = b""
            for number, wire, start, end in self._fields(entry, _ENTRY_FIELDS):
                if number == _ENTRY_KEY and wire == _LEN:
                    key = self.buffer[start:end]
                elif number == _ENTRY_VALUE and wire == _LEN:
                    value = self.buffer[start:end]
            values[_text(key)] = _text(value)
        return _text(name), values.get("location", "")

    def _fields(self, span: Span, wanted: frozenset[int]) -> list[tuple[int, int, int, int]]:
        """(field number, wire type, a, b) of each field numbered in `wanted` in the message at
        `span`, in order: a varint's value as a; a length-delimited field's bytes from a to b;
        every other field is stepped over. (This loop is the reader's time: the one-byte varints,
        nearly all of them, are read inline, and only the wanted fields make a tuple.)"""
        buffer = self.buffer
        found = []
        pos, end = span
        while pos < end:
            tag = buffer[pos]
            if tag < 0x80:
                pos += 1
            else:
                began = pos
                tag, pos = self._varint(pos, end)
                if tag >> 32 or pos - began > 5:  # protobuf reads a tag as a uint32, 5 bytes at most
                    raise _Undecided
            number, wire = tag >> 3, tag & 7
            if number == 0:
                raise _Undecided
            if wire == _LEN:
                length = buffer[pos] if pos < end else 0x80
                if length < 0x80:
                    pos += 1
                else:
                    length, pos = self._varint(pos, end)
                if length > end - pos:
                    raise _Undecided
                if number in wanted:
                    found.append((number, wire, pos, pos + length))
                pos += length
            elif wire == _VARINT:
                value = buffer[pos] if pos < end else 0x80
                if value < 0x80:
                    pos += 1
                else:
                    value, pos = self._varint(pos, end)
                if number in wanted:
                    found.append((number, wire, value, 0))
            elif wire == _I64:
                pos += 8
            elif wire == _I32:
                pos += 4
            else:  # a group (3, 4) or no wire type at all (6, 7)
                raise _Undecided
        if pos != end:  # a fixed-size field ran past its message
            raise _Undecided
        return found

    def _varint(self, pos: int, end: int) -> tuple[int, int]:
        buffer = self.buffer
        value = shift = 0
        while pos < end and shift < 70:
            byte = buffer[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:  # past 64 bits protobuf drops the rest, as here
                return value & 0xFFFF_FFFF_FFFF_FFFF, pos
            shift += 7
        raise _Undecided  # cut short, or longer than ten bytes


def _enum(value: int, known: frozenset[int], previous: int) -> int:
    """A proto2 enum field's value after one more occurrence: an int32, and one that the enum
    does not know leaves the field as it was (protobuf keeps it among the unknown fields)."""
    value &= 0xFFFF_FFFF
    return value if value in known else previous


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Undecided from None


def _initializers(graph: _Graph) -> Iterator[list[Span]]:
    """As `onnx.external_data_helper._get_initializer_tensors`: a graph's initializers first, then
    its subgraphs', each tensor as the spans protobuf merges into it."""
    yield from ([span] for span in graph.initializers)
    for attribute in graph.attributes:
        for subgraph in attribute.graphs:
            yield from _initializers(subgraph)


def _attribute_tensors(graph: _Graph) -> Iterator[list[Span]]:
    """As `onnx.external_data_helper._get_attribute_tensors_from_graph`: each attribute's `t`,
    then its `tensors`, then its subgraphs' attribute tensors (not their initializers)."""
    for attribute in graph.attributes:
        if attribute.t is not None:
            yield attribute.t
        yield from ([span] for span in attribute.tensors)
        for subgraph in attribute.graphs:
            yield from _attribute_tensors(subgraph)
