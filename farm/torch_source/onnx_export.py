"""The ONNX route's first step: the checkpoint exported with `torch.onnx.export`.

The dynamo exporter (torch.export -> ONNX through onnxscript) is tried first on an
ExportedProgram; where it cannot run (onnxscript missing, an op it cannot translate) the
TorchScript exporter traces the program's module instead. A TorchScript `.pt` goes to the
TorchScript exporter directly: the dynamo exporter takes an nn.Module or an ExportedProgram,
not a ScriptModule. The record says which exporter ran and why the other did not.

Exports are cached by checkpoint hash, input shapes and torch version, so a re-submission of
the same checkpoint compiles and is referenced against the same ONNX file.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.errors import ModelError
from ondevice_farm.torch_source.checkpoint import TorchCheckpoint
from ondevice_farm.torch_source.runtime import import_torch

DEFAULT_ONNX_OPSET = 18
EXPORT_FILE = "model.onnx"
RECORD_FILE = "export.json"


@dataclass(frozen=True)
class OnnxExport:
    path: Path
    #: dynamo or torchscript
    exporter: str
    opset: int
    output_names: tuple[str, ...]
    #: why an exporter tried before did not run
    fallbacks: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["output_names"] = list(self.output_names)
        return data


def output_names(count: int) -> tuple[str, ...]:
    return ("output",) if count == 1 else tuple(f"output_{i}" for i in range(count))


def _cache_key(checkpoint: TorchCheckpoint, inputs: dict[str, np.ndarray], opset: int) -> str:
    # with onnxscript installed later, the dynamo exporter may take what the TorchScript one did
    dynamo = importlib.util.find_spec("onnxscript") is not None
    digest = hashlib.sha256(f"{checkpoint.sha256}:{checkpoint.torch_version}:{opset}:{dynamo}".encode())
    for spec in checkpoint.inputs:
        array = inputs[spec.name]
        digest.update(f"{spec.name}:{array.dtype.str}:{array.shape}".encode())
    return digest.hexdigest()[:32]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporters print progress and deprecation chatter; none of it is the user's business."""
    names = ("torch.onnx", "torch.export", "onnxscript")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


def _export(
    checkpoint: TorchCheckpoint, args: tuple[Any, ...], names: tuple[str, ...], target: Path, opset: int
) -> tuple[str, list[str]]:
    torch = import_torch()
    input_names = [spec.name for spec in checkpoint.inputs]
    fallbacks: list[str] = []
    if checkpoint.kind == "exported_program":
        # onnxscript is the dynamo exporter's own dependency, which torch does not pull in
        if importlib.util.find_spec("onnxscript") is None:
            fallbacks.append("dynamo exporter: onnxscript is not installed")
        else:
            try:
                with _quiet():
                    torch.onnx.export(
                        checkpoint.loaded,
                        args,
                        str(target),
                        dynamo=True,
                        input_names=input_names,
                        output_names=list(names),
                        opset_version=opset,
                        external_data=False,
                    )
                return "dynamo", fallbacks
            except Exception as exc:  # the exporter raises its own error types per stage
                fallbacks.append(f"dynamo exporter: {_first_line(exc)}")
        # the TorchScript exporter cannot take the program's GraphModule (it calls .train());
        # a trace of it is an ordinary ScriptModule
        with _quiet():
            module = torch.jit.trace(checkpoint.module(), args, check_trace=False)
    else:
        fallbacks.append("dynamo exporter: takes an nn.Module or ExportedProgram, not a TorchScript module")
        module = checkpoint.module()
    with _quiet():
        torch.onnx.export(
            module,
            args,
            str(target),
            dynamo=False,
            input_names=input_names,
            output_names=list(names),
            opset_version=opset,
        )
    return "torchscript", fallbacks


def export_onnx(
    checkpoint: TorchCheckpoint,
    inputs: dict[str, np.ndarray],
    eager_output_count: int,
    cache_dir: Path,
    *,
    opset: int = DEFAULT_ONNX_OPSET,
) -> OnnxExport:
    """The checkpoint as ONNX (cached); ModelError where neither exporter can take it."""
    folder = cache_dir / _cache_key(checkpoint, inputs, opset)
    record = folder / RECORD_FILE
    if record.exists():
        data = json.loads(record.read_text(encoding="utf-8"))
        return OnnxExport(
            folder / EXPORT_FILE,
            data["exporter"],
            data["opset"],
            tuple(data["output_names"]),
            data["fallbacks"],
        )
    names = output_names(eager_output_count)
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=cache_dir))
    try:
        try:
            exporter, fallbacks = _export(
                checkpoint, checkpoint.example_args(inputs), names, staging / EXPORT_FILE, opset
            )
        except Exception as exc:  # both exporters failed: the ONNX route is closed for this model
            raise ModelError(
                f"{checkpoint.path}: torch.onnx.export cannot export it: {_first_line(exc)}",
                hint="coreml-torch/* targets convert the checkpoint without ONNX",
            ) from None
        done = OnnxExport(folder / EXPORT_FILE, exporter, opset, names, fallbacks)
        (staging / RECORD_FILE).write_text(json.dumps(done.to_dict()), encoding="utf-8")
        try:
            os.rename(staging, folder)
        except OSError:
            if not record.exists():  # lost a race to an equal writer: theirs is as good
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return done
