"""The `coreml-torch/*` route: coremltools' own PyTorch frontend on the checkpoint, no ONNX.

An ExportedProgram goes through `run_decompositions({})` (the core-ATen form coremltools'
frontend reads) and `ct.convert`; where coremltools refuses it, the program's module is traced
(`torch.jit.trace`) and converted again, and the report keeps the refusal. A TorchScript `.pt`
is converted as it is, with its input shapes. coremltools 9 has tested torch only up to
`coremltools._deps._TORCH_MAX_VERSION` and logs a warning for newer ones: the report keeps it.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.compile.report import CompiledArtifact, CompileReport
from ondevice_farm.errors import CompileError, UsageError
from ondevice_farm.runtimes.coreml.compile.convert import (
    DEFAULT_DEPLOYMENT_TARGET,
    DEFAULT_PRECISION,
    PACKAGE_NAME,
    CoreMLOptions,
    import_coremltools,
    quiet_coremltools,
)
from ondevice_farm.runtimes.coreml.compile.report import (
    FP16_NOTE,
    PLACEMENT_NOTE,
    mil_casts,
    mil_histogram,
    spec_io,
    tree_sha256,
)
from ondevice_farm.targets import Target
from ondevice_farm.torch_source.checkpoint import TorchCheckpoint
from ondevice_farm.torch_source.onnx_export import output_names
from ondevice_farm.torch_source.runtime import import_torch


@dataclass
class TorchConversion:
    """What coremltools made of the checkpoint: the model, and how it got there."""

    mlmodel: Any
    #: exported_program or traced
    frontend: str
    #: ATen op -> count in the graph coremltools read
    torch_ops: dict[str, int]
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    conversion_s: float = 0.0


def version_warning() -> str | None:
    """The warning coremltools logs at import when torch is newer than it has tested, or None."""
    ct = import_coremltools()
    from coremltools import _deps

    limit = str(getattr(_deps, "_TORCH_MAX_VERSION", "") or "")
    version = str(import_torch().__version__)
    if not limit:
        return None
    from packaging.version import Version

    if Version(version.split("+")[0]) <= Version(limit):
        return None
    return (
        f"Torch version {version} has not been tested with coremltools {ct.__version__}. "
        f"You may run into unexpected errors. Torch {limit} is the most recent version that has been tested."
    )


def _graph_ops(graph: Any) -> dict[str, int]:
    ops: Counter[str] = Counter()
    for node in graph.nodes:
        if getattr(node, "op", None) == "call_function":
            ops[str(getattr(node.target, "__name__", node.target)).split(".")[0]] += 1
    return dict(ops)


def _script_ops(module: Any) -> dict[str, int]:
    graph = module.inlined_graph if hasattr(module, "inlined_graph") else module.graph
    return dict(
        Counter(node.kind().split("::")[-1] for node in graph.nodes() if node.kind().startswith("aten::"))
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


#: what the PyTorch frontend prints on its way: progress bars, the op it stopped at (the refusal is
#: kept in the report), and an eval-mode reminder about the traced GraphModule (which is in eval)
_FRONTEND_NOISE = re.compile(r"Converting PyTorch Frontend|^ERROR - converting|not in eval mode")


@contextlib.contextmanager
def _quiet_frontend() -> Iterator[None]:
    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held), quiet_coremltools():
            yield
    finally:
        kept = [
            line
            for line in re.split(r"[\r\n]+", held.getvalue())
            if line and not _FRONTEND_NOISE.search(line)
        ]
        if kept:
            sys.stderr.write("\n".join(kept) + "\n")


def _convert(source: Any, options: CoreMLOptions, compute_units: str, **kwargs: Any) -> Any:
    ct = import_coremltools()
    precision = ct.precision.FLOAT16 if options.precision == "fp16" else ct.precision.FLOAT32
    with _quiet_frontend(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ct.convert(
            source,
            convert_to="mlprogram",
            compute_precision=precision,
            minimum_deployment_target=options.deployment_target(),
            compute_units=ct.ComputeUnit[compute_units],
            skip_model_load=True,
            **kwargs,
        )


def convert_checkpoint(
    checkpoint: TorchCheckpoint,
    shapes: dict[str, tuple[int, ...]],
    options: CoreMLOptions,
    compute_units: str = "ALL",
) -> TorchConversion:
    """The checkpoint through coremltools' PyTorch frontend; CompileError where it refuses."""
    ct = import_coremltools()
    torch = import_torch()
    started = time.perf_counter()
    found = version_warning()
    notes = [found] if found else []
    refusals: list[str] = []
    if checkpoint.kind == "exported_program":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = checkpoint.loaded.run_decompositions({})
        try:
            model = _convert(program, options, compute_units)
            return TorchConversion(
                model,
                "exported_program",
                _graph_ops(program.graph),
                refusals,
                notes,
                time.perf_counter() - started,
            )
        except Exception as exc:  # coremltools raises ValueError, NotImplementedError, AssertionError ...
            refusals.append(f"ExportedProgram: {_first_line(exc)}")
        args = tuple(torch.zeros(shapes[s.name], dtype=getattr(torch, s.dtype)) for s in checkpoint.inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = torch.jit.trace(checkpoint.module(), args, check_trace=False)
    else:
        module = checkpoint.module()
    inputs = [
        ct.TensorType(name=s.name, shape=shapes[s.name], dtype=np.dtype(s.dtype).type)
        for s in checkpoint.inputs
    ]
    try:
        model = _convert(module, options, compute_units, inputs=inputs)
    except Exception as exc:  # as above
        refusals.append(f"traced module: {_first_line(exc)}")
        raise CompileError(
            f"coremltools' PyTorch frontend refused {checkpoint.path.name}: " + "; ".join(refusals),
            hint="coreml/* targets take the ONNX route instead, where the checkpoint exports to ONNX",
        ) from None
    return TorchConversion(
        model, "traced", _script_ops(module), refusals, notes, time.perf_counter() - started
    )


def _named_like_export(io: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Each input/output entry with the name the ONNX export (and the eager reference) gives it:
    coremltools names a program's outputs after their last node (`gelu`, `linear_1`), in order."""
    for entry in io["inputs"]:
        entry["onnx_name"] = entry["name"]
    for entry, name in zip(io["outputs"], output_names(len(io["outputs"])), strict=True):
        entry["onnx_name"] = name
    return io


def package_bytes(path: Path) -> int:
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if path.is_dir()
        else path.stat().st_size
    )


def compile_coreml_torch(
    checkpoint: TorchCheckpoint,
    target: Target,
    out_dir: Path,
    shapes: dict[str, tuple[int, ...]],
    *,
    precision: str = DEFAULT_PRECISION,
    minimum_deployment_target: str = DEFAULT_DEPLOYMENT_TARGET,
) -> CompiledArtifact:
    """Compile the checkpoint for a `coreml-torch/*` target into `<out_dir>/model.mlpackage`."""
    if target.runtime != "coreml" or target.route != "torch":
        raise UsageError(f"{target.name} is not a coreml-torch target")
    options = CoreMLOptions(precision, minimum_deployment_target)
    compute_units = target.backend_spec.native
    done = convert_checkpoint(checkpoint, shapes, options, compute_units)
    package = out_dir / PACKAGE_NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    if package.exists():
        shutil.rmtree(package)
    done.mlmodel.save(str(package))
    program = done.mlmodel._mil_program
    after_ops = mil_histogram(program)
    notes = [PLACEMENT_NOTE] if sys.platform != "darwin" else []
    if options.precision == "fp16":
        notes.append(FP16_NOTE)
    notes.extend(f"coremltools warns: {w}" for w in done.warnings)
    notes.extend(f"coremltools refused the {r}; converted the traced module instead" for r in done.refusals)
    report = CompileReport(
        target=target.name,
        nodes_before=sum(done.torch_ops.values()),
        nodes_after=sum(after_ops.values()),
        op_types_before=done.torch_ops,
        op_types_after=dict(after_ops),
        # ATen and MIL op names do not compare: the route comparison sets them against the ONNX route's
        fusions=[],
        precision=options.precision,
        notes=notes,
        extra={
            "route": "torch",
            "frontend": done.frontend,
            "frontend_refusals": done.refusals,
            "coremltools_warnings": done.warnings,
            "checkpoint_sha256": checkpoint.sha256,
            "torch_version": checkpoint.torch_version,
            "mil_ops_after_passes": {"count": sum(after_ops.values()), "op_types": dict(after_ops)},
            "casts": mil_casts(program),
            **_named_like_export(spec_io(done.mlmodel.get_spec())),
            "compute_units": compute_units,
            "minimum_deployment_target": options.minimum_deployment_target,
            "coremltools_version": import_coremltools().__version__,
            "conversion_s": round(done.conversion_s, 3),
            "package_bytes": package_bytes(package),
        },
    )
    return CompiledArtifact(target=target, path=package, sha256=tree_sha256(package), report=report)
