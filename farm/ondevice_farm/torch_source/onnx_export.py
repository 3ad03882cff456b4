"""The ONNX route's first step: the checkpoint exported with `torch.onnx.export`.

The dynamo exporter (torch.export -> ONNX through onnxscript) is tried first on an
ExportedProgram; where it cannot run (onnxscript missing, an op it cannot translate) the
TorchScript exporter traces the program's module instead. A TorchScript `.pt` goes to the
TorchScript exporter directly: the dynamo exporter takes an nn.Module or an ExportedProgram,
not a ScriptModule. The record says which exporter ran and why the other did not. Where neither
can take the checkpoint, `OnnxExportRefused` says why in one line: ingest keeps going without ONNX
for the targets that convert the checkpoint itself.

Exports are cached by checkpoint hash, input shapes and torch version, so a re-submission of
the same checkpoint compiles and is referenced against the same ONNX file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_farm.errors import ModelError, install_hint
from ondevice_farm.model_cache import write_atomically
from ondevice_farm.runtimes.registry import checkpoint_sources
from ondevice_farm.torch_source.checkpoint import TorchCheckpoint
from ondevice_farm.torch_source.program import named_op, quiet_converters
from ondevice_farm.torch_source.runtime import import_torch

DEFAULT_ONNX_OPSET = 18
DYNAMO = "dynamo exporter"
#: why the dynamo exporter did not run, as the export record keeps it
DYNAMO_NEEDS_ONNXSCRIPT = f"{DYNAMO}: onnxscript is not installed"
DYNAMO_NEEDS_PROGRAM = f"{DYNAMO}: takes an nn.Module or ExportedProgram, not a TorchScript module"
EXPORT_FILE = "model.onnx"
RECORD_FILE = "export.json"
#: beside the exports, `<key>.refused.json`: a refusal is as reproducible as an export, and
#: both exporters take seconds to refuse again
REFUSED_SUFFIX = ".refused.json"
#: what the hints offer where there is no ONNX: the targets whose converters read the checkpoint
WITHOUT_ONNX = f"{checkpoint_sources()} targets convert the checkpoint without ONNX"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: how the dynamo exporter spells the op it has no ONNX function for
_OVERLOAD = re.compile(r"<OpOverload\(op='([^']+)', overload='([^']+)'\)>")


class OnnxExportRefused(ModelError):
    """Neither exporter can take the checkpoint: `reason` is the one line without the path, `op`
    the ATen op it names (where it names one)."""

    def __init__(
        self, message: str, *, reason: str = "", op: str | None = None, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.reason = reason or message
        self.op = op

    def __reduce__(self) -> tuple[object, ...]:
        # crosses Ray's process boundary with the prepared submission: keep reason and op
        return (_rebuild_refusal, (self.message, self.reason, self.op, self.hint))


def _rebuild_refusal(message: str, reason: str, op: str | None, hint: str) -> OnnxExportRefused:
    return OnnxExportRefused(message, reason=reason, op=op, hint=hint)


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


def _first_line(exc: BaseException) -> str:
    # the dynamo exporter wraps the error that names the op (its DispatchError) in two
    # ConversionErrors whose text is generic advice: the innermost cause is the reason
    while exc.__cause__ is not None and type(exc).__module__.startswith("torch.onnx"):
        exc = exc.__cause__
    text = _OVERLOAD.sub(r"\1.\2", _ANSI.sub("", str(exc))).strip()
    # the TorchScript exporter follows its reason with the whole graph node ("[Caused by ...")
    first = text.splitlines()[0].split(" [Caused by", 1)[0].strip() if text else ""
    return f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__


class _ExportFailed(Exception):
    """The last exporter tried failed: which one, why, and why those before it did not run."""

    def __init__(self, exporter: str, cause: BaseException, fallbacks: list[str]) -> None:
        super().__init__(exporter)
        self.exporter = exporter
        self.cause = cause
        self.fallbacks = fallbacks


def _failure(checkpoint: TorchCheckpoint, failed: _ExportFailed) -> OnnxExportRefused:
    """One line that says which exporter ran and why the other did not; a hint with what to
    install or try, by that reason."""
    ran = f"the {failed.exporter} exporter failed: {_first_line(failed.cause)}"
    before = "; ".join(f.removeprefix(f"{DYNAMO}: ") for f in failed.fallbacks)
    without_onnx = WITHOUT_ONNX
    if DYNAMO_NEEDS_ONNXSCRIPT in failed.fallbacks:
        why, hint = (
            f"the {DYNAMO} did not run: onnxscript is not installed",
            f"install the `torch` extra, which brings onnxscript ({install_hint('torch')}), and run this "
            f"again: the {DYNAMO} takes programs the TorchScript one cannot; or {without_onnx}",
        )
    elif DYNAMO_NEEDS_PROGRAM in failed.fallbacks:
        why, hint = (
            f"the {DYNAMO} did not run: it takes an nn.Module or ExportedProgram, not a TorchScript module",
            "save the model as a .pt2 (torch.export.save(torch.export.export(model, args), 'model.pt2')) "
            f"so the {DYNAMO} can take it ({install_hint('torch')} brings onnxscript, which it needs); "
            f"or {without_onnx}",
        )
    else:
        why, hint = (
            f"the {DYNAMO} failed first ({before})" if before else f"the {DYNAMO} was not tried",
            f"{without_onnx}; or export it to ONNX yourself (torch.onnx.export) and submit the .onnx",
        )
    reason = f"{ran}; {why}"
    return OnnxExportRefused(
        f"{checkpoint.path}: torch.onnx.export cannot export it: {reason}",
        reason=reason,
        op=named_op(failed.cause),
        hint=hint,
    )


def _export(
    checkpoint: TorchCheckpoint, args: tuple[Any, ...], names: tuple[str, ...], target: Path, opset: int
) -> tuple[str, list[str]]:
    """(the exporter that ran, why those tried before it did not); _ExportFailed where the last
    one tried failed."""
    torch = import_torch()
    input_names = [spec.name for spec in checkpoint.inputs]
    fallbacks: list[str] = []
    if checkpoint.kind == "exported_program":
        # onnxscript is the dynamo exporter's own dependency, which torch does not pull in
        if importlib.util.find_spec("onnxscript") is None:
            fallbacks.append(DYNAMO_NEEDS_ONNXSCRIPT)
        else:
            try:
                with quiet_converters("torch.onnx", "onnxscript"):
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
                fallbacks.append(f"{DYNAMO}: {_first_line(exc)}")
    else:
        fallbacks.append(DYNAMO_NEEDS_PROGRAM)
    try:
        if checkpoint.kind == "exported_program":
            # the TorchScript exporter cannot take the program's GraphModule (it calls .train());
            # a trace of it is an ordinary ScriptModule
            with quiet_converters("torch.onnx", "onnxscript"):
                module = torch.jit.trace(checkpoint.module(), args, check_trace=False)
        else:
            module = checkpoint.module()
        with quiet_converters("torch.onnx", "onnxscript"):
            torch.onnx.export(
                module,
                args,
                str(target),
                dynamo=False,
                input_names=input_names,
                output_names=list(names),
                opset_version=opset,
            )
    except Exception as exc:  # the TorchScript exporter's errors, of many types
        raise _ExportFailed("TorchScript", exc, fallbacks) from None
    return "torchscript", fallbacks


def _cached_refusal(checkpoint: TorchCheckpoint, data: dict[str, Any]) -> OnnxExportRefused:
    """A refusal recorded before, told with this checkpoint's path (the same content may move)."""
    reason = str(data["reason"])
    return OnnxExportRefused(
        f"{checkpoint.path}: torch.onnx.export cannot export it: {reason}",
        reason=reason,
        op=data.get("op"),
        hint=data.get("hint"),
    )


def export_onnx(
    checkpoint: TorchCheckpoint,
    inputs: dict[str, np.ndarray],
    eager_output_count: int,
    cache_dir: Path,
    *,
    opset: int = DEFAULT_ONNX_OPSET,
) -> OnnxExport:
    """The checkpoint as ONNX (cached); OnnxExportRefused where neither exporter can take it
    (cached too)."""
    key = _cache_key(checkpoint, inputs, opset)
    folder = cache_dir / key
    record = folder / RECORD_FILE
    refused = cache_dir / f"{key}{REFUSED_SUFFIX}"
    if refused.exists():
        raise _cached_refusal(checkpoint, json.loads(refused.read_text(encoding="utf-8")))
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
        except _ExportFailed as failed:  # the ONNX route is closed for this model
            refusal = _failure(checkpoint, failed)
            write_atomically(
                refused, json.dumps({"reason": refusal.reason, "op": refusal.op, "hint": refusal.hint})
            )
            raise refusal from None
        except Exception as exc:  # torch itself failed before any exporter ran
            reason = _first_line(exc)
            raise OnnxExportRefused(
                f"{checkpoint.path}: torch.onnx.export cannot export it: {reason}",
                reason=reason,
                op=named_op(exc),
                hint=WITHOUT_ONNX,
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
