"""Read a PyTorch checkpoint: a `torch.export` ExportedProgram (`.pt2`) or a TorchScript module (`.pt`).

The checkpoint names its inputs (the program's placeholders, or the scripted `forward`'s
arguments) and their shapes: an ExportedProgram stores them; TorchScript does not, so its
shapes come from `--inputs inputs.npz` or `--shape` (float32).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.artifacts import sha256_file
from ondevice_farm.errors import ModelError, UsageError
from ondevice_farm.model import TensorSpec
from ondevice_farm.torch_source.runtime import import_torch

#: suffix -> checkpoint kind
CHECKPOINT_KINDS: dict[str, str] = {".pt2": "exported_program", ".pt": "torchscript"}


CHECKPOINT_HINT = "pass a .pt2 saved with torch.export.save, or a TorchScript .pt saved with torch.jit.save"


def is_torch_checkpoint(path: Path) -> bool:
    return path.suffix.lower() in CHECKPOINT_KINDS


@dataclass
class TorchCheckpoint:
    path: Path
    sha256: str
    #: exported_program or torchscript
    kind: str
    torch_version: str
    inputs: tuple[TensorSpec, ...]
    #: the ExportedProgram or the ScriptModule, as torch loaded it
    loaded: Any

    @property
    def name(self) -> str:
        return self.path.stem

    def module(self) -> Any:
        """A callable module in eval mode: the program's GraphModule, or the ScriptModule."""
        if self.kind == "exported_program":
            return self.loaded.module()
        return self.loaded.eval()

    def example_args(self, inputs: dict[str, np.ndarray]) -> tuple[Any, ...]:
        torch = import_torch()
        return tuple(torch.from_numpy(np.ascontiguousarray(inputs[spec.name])) for spec in self.inputs)


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _program_inputs(program: Any, path: Path) -> tuple[TensorSpec, ...]:
    wanted = list(program.graph_signature.user_inputs)
    specs = []
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in wanted:
            continue
        value = node.meta.get("val")
        if value is None or not hasattr(value, "shape"):
            raise ModelError(f"{path}: input {node.name!r} is not a tensor; only tensor inputs are supported")
        dims = tuple(int(d) if str(d).isdigit() else str(d) for d in value.shape)
        specs.append(TensorSpec(node.name, _dtype_name(value.dtype), dims))
    return tuple(specs)


def _script_input_names(module: Any) -> list[str]:
    schema = module.forward.schema
    return [arg.name for arg in schema.arguments[1:]]


def load_checkpoint(
    path: Path,
    *,
    shapes: dict[str, tuple[int, ...]] | None = None,
    example: dict[str, np.ndarray] | None = None,
) -> TorchCheckpoint:
    """Load and describe a checkpoint; ModelError if torch cannot read it, UsageError if a
    TorchScript module comes without the shapes of its inputs."""
    if not path.exists():
        raise ModelError(f"{path}: no such file", hint=CHECKPOINT_HINT)
    kind = CHECKPOINT_KINDS.get(path.suffix.lower())
    if kind is None:
        raise ModelError(f"{path}: not a PyTorch checkpoint (.pt2 ExportedProgram or .pt TorchScript)")
    torch = import_torch()
    how = "torch.export.load" if kind == "exported_program" else "torch.jit.load"
    # torch.export.load logs the whole traceback of a failed read before raising it
    export_logger = logging.getLogger("torch.export")
    level = export_logger.level
    export_logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.jit.load is deprecated in favour of torch.export
            loaded = torch.export.load(str(path)) if kind == "exported_program" else torch.jit.load(str(path))
    except Exception as exc:  # torch raises RuntimeError, zipfile errors, pickle errors ...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: {how} cannot read it: {first}", hint=CHECKPOINT_HINT) from None
    finally:
        export_logger.setLevel(level)
    if kind == "exported_program":
        specs = _program_inputs(loaded, path)
    else:
        specs = _script_inputs(path, _script_input_names(loaded), shapes or {}, example or {})
    return TorchCheckpoint(path, sha256_file(path), kind, str(torch.__version__), specs, loaded)


def _script_inputs(
    path: Path, names: list[str], shapes: dict[str, tuple[int, ...]], example: dict[str, np.ndarray]
) -> tuple[TensorSpec, ...]:
    specs = []
    for name in names:
        if name in example:
            specs.append(
                TensorSpec(name, str(example[name].dtype), tuple(int(d) for d in example[name].shape))
            )
        elif name in shapes:
            specs.append(TensorSpec(name, "float32", shapes[name]))
        else:
            raise UsageError(
                f"{path}: a TorchScript module does not store its input shapes; give {name!r}",
                hint=f"--example-inputs inputs.npz (arrays named {', '.join(names)}) "
                f"or --shape {name}=1x3x224x224",
            )
    return tuple(specs)
