"""`farm compile MODEL --targets ...`: the compile reports alone, no device."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ondevice_farm.cli.context import CliState, handles_errors
from ondevice_farm.compile.placement import short_provider
from ondevice_farm.config import DEFAULT_SEED
from ondevice_farm.errors import FarmError, UsageError
from ondevice_farm.inputs import UnpinnedDims, parse_shapes, resolve_shapes, unpinned_dims
from ondevice_farm.reports.terminal import stdout_console
from ondevice_farm.targets import Target, parse_targets, with_torch_routes


@click.command("compile")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--targets", "-t", default="ort/cpu", show_default=True, help="Comma-separated targets.")
@click.option("--shape", "shapes", multiple=True, help="Input shape for dynamic dims: name=1x3x224x224.")
@click.option(
    "--example-inputs",
    "example_inputs",
    type=click.Path(path_type=Path),
    help="PyTorch checkpoints: .npz of example inputs by name (a TorchScript .pt needs it, or --shape); "
    "any model: where --fix NAME takes NAME's value.",
)
@click.option("--coreml-precision", type=click.Choice(["fp16", "fp32"]), default="fp16", show_default=True)
@click.option(
    "--coreml-quantization",
    type=click.Choice(["keep", "float"]),
    default="keep",
    show_default=True,
    help="QDQ models on CoreML: keep 8-bit weights and activations, or fold them to float.",
)
@click.option(
    "--fix",
    "fixes",
    multiple=True,
    help="CoreML targets: pin a scalar input to a value (sr=16000; NAME alone: its value in "
    "--example-inputs), so the Ifs and shapes it decides fold.",
)
@click.option(
    "--report-only",
    is_flag=True,
    help="Exit 0 although a target failed (each failure is reported either way).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.pass_obj
@handles_errors
def compile_command(
    state: CliState,
    model: Path,
    targets: str,
    shapes: tuple[str, ...],
    example_inputs: Path | None,
    coreml_precision: str,
    coreml_quantization: str,
    fixes: tuple[str, ...],
    report_only: bool,
    as_json: bool,
) -> None:
    """Compile MODEL (.onnx, or a PyTorch .pt2/.pt checkpoint) for each target and print what the
    compiler did. From a checkpoint, each coreml/* target is compiled by both routes, side by side."""
    from ondevice_farm.artifacts import ArtifactStore
    from ondevice_farm.compile import compile_for_target
    from ondevice_farm.compile.report import CompiledArtifact
    from ondevice_farm.model import inspect_model
    from ondevice_farm.runtimes.coreml.compile.routes import route_pairs
    from ondevice_farm.torch_source.checkpoint import is_torch_checkpoint

    fixed_inputs = compile_fixes(fixes, example_inputs)
    wanted = parse_targets(targets)
    if not wanted:
        raise UsageError("--targets is empty")
    home = state.home.ensure()
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
    if as_json:
        document: dict[str, Any] = {"model": model_doc, "targets": reports}
        if routes:
            document["routes"] = routes
        sys.stdout.write(json.dumps(document) + "\n")
    else:
        _print_reports(reports, model_doc, routes)
        from ondevice_farm.reports.runtimes import print_runtimes, runtime_rows

        print_runtimes(stdout_console(), runtime_rows(reports))
    if first_failure is not None and not report_only:
        click.echo(
            f"farm: error: {len(failed)} of {len(asked)} targets failed: {', '.join(failed)}", err=True
        )
        sys.exit(first_failure.exit_code)


def _print_reports(reports: list[dict[str, Any]], model_doc: dict[str, Any], routes: dict[str, Any]) -> None:
    from ondevice_farm.compile.precision import describe as describe_precision
    from ondevice_farm.reports.routes import print_routes, print_source

    console = stdout_console()
    if "source" in model_doc:
        print_source(console, model_doc["source"])
    for entry in reports:
        if "error" in entry:
            hint = f" [dim](hint: {escape(entry['hint'])})[/dim]" if entry["hint"] else ""
            console.print(
                f"[bold]{entry['target']}[/bold]: [red]failed: {escape(entry['error'])}[/red]{hint}"
            )
            continue
        rep = entry["report"]
        console.print(
            f"[bold]{entry['target']}[/bold]: {rep['nodes_before']} nodes -> {rep['nodes_after']} after "
            f"optimisation, precision {rep['precision']}, partitions {rep['partitions']}",
            highlight=False,
        )
        if rep.get("op_precision"):
            console.print(f"  op precision: {describe_precision(rep['op_precision'])}")
        size = rep.get("extra", {}).get("package_bytes")
        if size is not None:
            weights = rep["extra"].get("weight_bytes") or {}
            held = ", ".join(f"{dtype} {count / 1024:.1f} KiB" for dtype, count in weights.items())
            console.print(f"  package {size / 1024:.1f} KiB" + (f" (weights: {held})" if held else ""))
        artifact_bytes = rep.get("extra", {}).get("artifact_bytes")
        if artifact_bytes is not None:
            converter = rep["extra"].get("converter")
            by = f" ({converter})" if converter else ""
            console.print(f"  artifact {artifact_bytes / 1024:.1f} KiB{by}", highlight=False)
        changes = ", ".join(f"{f['op_type']} {f['before']}->{f['after']}" for f in rep["fusions"])
        if changes:
            console.print(f"  op changes: {changes}", highlight=False)
        # a runtime with a delegate: what it took against its own kernels, in the lowered graph
        kernels = rep.get("extra", {}).get("fallback_kernels")
        if rep["placement"]:
            # placement is recorded on the graph ONNX Runtime partitions, after its basic
            # optimisations: `farm check` counts the same graph ("ORT basic")
            placed = sum(int(n) for n in rep["placement"].values())
            per_provider = ", ".join(f"{short_provider(p)} {n}" for p, n in sorted(rep["placement"].items()))
            where = "as lowered" if kernels else "as partitioned"
            after = "" if kernels else ", after basic optimisations"
            console.print(
                f"  nodes per provider {where} ({placed}{after}): {per_provider}",
                highlight=False,
            )
        console.print(f"  artifact: {entry['artifact']}", highlight=False, soft_wrap=True)
        if rep["fallback_ops"]:
            label = f"fallbacks to {kernels} kernels" if kernels else "CPU fallbacks"
            console.print(f"  [yellow]{label}[/yellow]: {', '.join(rep['fallback_ops'])}")
        for note in rep["notes"]:
            console.print(f"  [dim]note: {note}[/dim]")
    for backend, comparison in routes.items():
        print_routes(console, backend, comparison)


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
