"""The checkpoint as a `torch.export` ExportedProgram: what the checkpoint runtimes convert.

A `.pt2` is one already. A TorchScript `.pt` goes through torch's TorchScript -> ExportedProgram
converter (`torch._export.converter.TS2EPConverter`, the one `torch.export` documents for
TorchScript users); where it cannot convert the module, the refusal names what it stopped at.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ondevice_farm.errors import CompileError
from ondevice_farm.torch_source.checkpoint import TorchCheckpoint
from ondevice_farm.torch_source.runtime import import_torch

#: an ATen op as torch spells it in errors and graphs: `aten.mean.dim`, `aten::mean`
_ATEN_OP = re.compile(r"aten(?:\.|::)[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


def named_op(exc: BaseException) -> str | None:
    """The first ATen op an error message names, e.g. `aten.linalg_inv.default`, or None."""
    found = _ATEN_OP.search(str(exc))
    return found.group(0).replace("::", ".") if found else None


@contextlib.contextmanager
def _quiet_descriptors() -> Iterator[None]:
    """stdout and stderr at the descriptor level: the converters' C++ parts (absl logging, the
    flatbuffer exporter, a runtime's cpuinfo) write there, past Python's streams."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        for fd in saved:
            os.close(fd)


@contextlib.contextmanager
def quiet_converters(*loggers: str) -> Iterator[None]:
    """Converters print progress, warnings and whole tracebacks on their way; a refusal is
    reported once, as one line, by the caller."""
    names = ("torch.export", "torch._export", "torch.fx", *loggers)
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
            _quiet_descriptors(),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def sample_args(checkpoint: TorchCheckpoint, shapes: dict[str, tuple[int, ...]]) -> tuple[Any, ...]:
    """Zero tensors of the inputs' shapes and dtypes: what a converter traces with."""
    torch = import_torch()
    return tuple(torch.zeros(shapes[s.name], dtype=getattr(torch, s.dtype)) for s in checkpoint.inputs)


def exported_program(checkpoint: TorchCheckpoint, shapes: dict[str, tuple[int, ...]], runtime: str) -> Any:
    """The checkpoint's ExportedProgram; CompileError naming `runtime` where a TorchScript module
    cannot be converted to one."""
    if checkpoint.kind == "exported_program":
        return checkpoint.loaded
    try:
        from torch._export.converter import TS2EPConverter

        with quiet_converters():
            return TS2EPConverter(checkpoint.loaded, sample_args(checkpoint, shapes)).convert()
    except Exception as exc:  # the converter raises whatever the TorchScript op it meets raises
        op = named_op(exc)
        raise CompileError(
            f"{runtime} needs an ExportedProgram; torch cannot convert the TorchScript module "
            f"{checkpoint.path.name}" + (f" at {op}" if op else "") + f": {first_line(exc)}",
            hint="save the model with torch.export.save (.pt2)",
        ) from None


def op_name(target: Any) -> str:
    """`aten.mean.dim` for an ATen or Edge op overload; the function's name otherwise."""
    name = getattr(target, "_name", None) or getattr(target, "__name__", None) or str(target)
    overload = getattr(target, "_overloadname", None)
    text = str(name).replace("::", ".")
    if overload and not text.endswith(f".{overload}"):
        text = f"{text}.{overload}"
    return text


def graph_ops(graph: Any) -> Counter[str]:
    """op -> count of a torch.fx graph's call_function nodes (getitem left out: not a kernel)."""
    ops: Counter[str] = Counter()
    for node in graph.nodes:
        if node.op == "call_function" and getattr(node.target, "__name__", "") != "getitem":
            ops[op_name(node.target)] += 1
    return ops


def core_aten_ops(program: Any) -> Counter[str]:
    """The program's ops after torch's core-ATen decompositions: the "before" of a compile report."""
    with quiet_converters():
        decomposed = program.run_decompositions()
    return graph_ops(decomposed.graph)
