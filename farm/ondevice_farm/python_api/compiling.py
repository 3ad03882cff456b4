"""`compile_model`: a model compiled for each target, with each compiler's report, no device. The
one compile path: `farm compile` calls `compile_document`; Python calls `compile_model` (not
`compile`: `ondevice_farm.compile` is the compilers' package, which would shadow it).

One target's failure (a missing coremltools, an op its lowering refuses) says nothing about the
others: every target is compiled and each failure reported with its hint."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ondevice_farm.config import DEFAULT_SEED, FarmHome
from ondevice_farm.errors import FarmError, UsageError
from ondevice_farm.inputs import UnpinnedDims, parse_shapes, resolve_shapes, unpinned_dims
from ondevice_farm.python_api.place import Farm
from ondevice_farm.python_api.submitting import ModelLike, model_file, shape_texts
from ondevice_farm.python_api.values import frozen
from ondevice_farm.targets import Target, parse_targets, with_torch_routes


@dataclass(frozen=True)
class CompileOutcome:
    """`farm compile --json`'s document, and the failures among the targets asked for."""

    document: dict[str, Any]
    #: the first asked-for target's error (raised by `compile_model` unless `report_only`)
    first_failure: FarmError | None
    failed: tuple[str, ...]
    asked: int


@dataclass(frozen=True)
class CompiledTarget:
    target: str
    #: the artifact's path in the farm's artifact store, its sha256 and the compiler's report
    #: (docs/results.md `compile`); None where the target failed (`error`, `hint`)
    artifact: Path | None
    sha256: str | None
    report: MappingProxyType[str, Any] | None
    error: str | None
    hint: str | None

    @classmethod
    def of(cls, entry: dict[str, Any]) -> CompiledTarget:
        return cls(
            target=str(entry["target"]),
            artifact=Path(entry["artifact"]) if entry.get("artifact") else None,
            sha256=entry.get("sha256"),
            report=frozen(entry["report"]) if entry.get("report") else None,
            error=entry.get("error"),
            hint=entry.get("hint"),
        )


@dataclass(frozen=True)
class Compiled:
    model: str
    targets: tuple[CompiledTarget, ...]
    document: MappingProxyType[str, Any] = field(repr=False, compare=False)

    def target(self, name: str) -> CompiledTarget:
        for built in self.targets:
            if built.target == name:
                return built
        raise KeyError(f"no target {name} in this compile")


def compile_model(
    model: ModelLike,
    *,
    targets: str | Sequence[str] = "ort/cpu",
    shapes: Mapping[str, Sequence[int]] | Sequence[str] = (),
    example_inputs: str | Path | None = None,
    coreml_precision: str = "fp16",
    coreml_quantization: str = "keep",
    fixes: Sequence[str] = (),
    report_only: bool = False,
    farm: Farm | None = None,
) -> Compiled:
    """`farm compile MODEL --targets ...` from Python: each target's artifact and report. The first
    failed target's error is raised once all are compiled, unless `report_only`."""
    example = None if example_inputs is None else Path(example_inputs)
    place = farm or Farm()
    with model_file(model) as path:
        outcome = compile_document(
            path,
            parse_targets(targets if isinstance(targets, str) else ",".join(targets)) or [],
            shapes=shape_texts(shapes),
            example_inputs=example,
            coreml_precision=coreml_precision,
            coreml_quantization=coreml_quantization,
            fixed_inputs=compile_fixes(tuple(fixes), example),
            home=place.farm_home,
        )
    if outcome.first_failure is not None and not report_only:
        raise outcome.first_failure
    document = outcome.document
    return Compiled(
        model=str(document["model"]["name"]),
        targets=tuple(CompiledTarget.of(t) for t in document["targets"]),
        document=frozen(document),
    )


def compile_document(
    model: Path,
    wanted: list[Target],
    *,
    shapes: tuple[str, ...],
    example_inputs: Path | None,
    coreml_precision: str,
    coreml_quantization: str,
    fixed_inputs: dict[str, float],
    home: FarmHome,
) -> CompileOutcome:
    """Every target compiled (from a checkpoint, each coreml/* target by both routes)."""
    from ondevice_farm.artifacts import ArtifactStore
    from ondevice_farm.compile import compile_for_target
    from ondevice_farm.compile.report import CompiledArtifact
    from ondevice_farm.model import inspect_model
    from ondevice_farm.runtimes.coreml.compile.routes import route_pairs
    from ondevice_farm.torch_source.checkpoint import is_torch_checkpoint

    if not wanted:
        raise UsageError("--targets is empty")
    home = home.ensure()
    source = None
    asked = set(wanted)
    # a checkpoint's shapes are its example inputs' (or --shape's): pinned, none left for a note
    unpinned: UnpinnedDims | None = None
    if is_torch_checkpoint(model):
        from ondevice_farm.torch_source.ingest import ingest_torch

        source = ingest_torch(
            model,
            shapes=parse_shapes(shapes),
            example_inputs=example_inputs,
            seed=DEFAULT_SEED,
            export_dir=home.torch / "exports",
            reference_dir=home.torch / "references",
        )
        wanted = with_torch_routes(wanted)
        # without an ONNX export: the export's error where no target converts the checkpoint
        source.require_runnable(wanted)
        info, input_shapes = source.info, source.shapes
        onnx_path = source.export.path if source.export is not None else source.info.path
    else:
        info = inspect_model(model)
        pinned = parse_shapes(shapes)
        input_shapes = resolve_shapes(info, pinned)
        unpinned = unpinned_dims(info, pinned, input_shapes)
        onnx_path = model
    store = ArtifactStore(home.artifacts)
    reports: list[dict[str, Any]] = []
    built: dict[Target, CompiledArtifact] = {}
    # One target's failure (a missing coremltools, an op its lowering refuses) says nothing about
    # the others: every target is compiled, each failure reported with its hint, and the command
    # exits with the first failure's code once all are shown.
    first_failure: FarmError | None = None
    failed: list[str] = []
    for target in wanted:
        try:
            if source is not None:  # a target built from an ONNX export the checkpoint lacks
                source.check_target(target)
            artifact = compile_for_target(
                onnx_path,
                target,
                store,
                input_shapes=input_shapes,
                coreml_precision=coreml_precision,
                source=source.checkpoint if source is not None else None,
                coreml_quantization=coreml_quantization,
                coreml_fixed_inputs=fixed_inputs,
                unpinned=unpinned,
            )
            built[target] = artifact
        except FarmError as exc:
            # a coreml-torch twin the user did not ask for is reported, not fatal: its refusal is news
            if target in asked:
                first_failure = first_failure or exc
                failed.append(target.name)
            reports.append({"target": target.name, "error": exc.message, "hint": exc.hint})
            continue
        reports.append(
            {
                "target": target.name,
                "artifact": str(artifact.path),
                "sha256": artifact.sha256,
                "report": artifact.report.to_dict(),
            }
        )
    model_doc: dict[str, Any] = {"name": info.name, "sha256": info.sha256}
    if source is not None:
        model_doc["source"] = source.document()
    routes = route_pairs(built)
    document: dict[str, Any] = {"model": model_doc, "targets": reports}
    if routes:
        document["routes"] = routes
    return CompileOutcome(document, first_failure, tuple(failed), len(asked))


def compile_fixes(fixes: tuple[str, ...], example_inputs: Path | None) -> dict[str, float]:
    """`--fix` as the CoreML compile takes it: `--fix NAME` alone takes NAME's value from
    `--example-inputs` (as `farm submit --fix NAME` takes it from `--inputs`)."""
    if not fixes:  # no numpy, onnx or lowering imported for a compile that pins nothing
        return {}
    import numpy as np

    from ondevice_farm.runtimes.coreml.compile.pinning import fixes_from_inputs, parse_fixes

    parsed = parse_fixes(fixes)
    given: dict[str, Any] = {}
    if example_inputs is not None and None in parsed.values():
        try:
            with np.load(example_inputs, allow_pickle=False) as archive:
                given = {name: archive[name] for name in archive.files}
        except (OSError, ValueError) as exc:
            raise UsageError(f"--example-inputs {example_inputs}: not a readable .npz file ({exc})") from None
    source = None if example_inputs is None else f"--example-inputs {example_inputs}"
    return fixes_from_inputs(parsed, given, source)
