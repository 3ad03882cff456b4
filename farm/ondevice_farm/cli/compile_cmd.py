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
from ondevice_farm.reports.terminal import stdout_console
from ondevice_farm.targets import parse_targets


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
    from ondevice_farm.python_api.compiling import compile_document, compile_fixes

    outcome = compile_document(
        model,
        parse_targets(targets) or [],
        shapes=shapes,
        example_inputs=example_inputs,
        coreml_precision=coreml_precision,
        coreml_quantization=coreml_quantization,
        fixed_inputs=compile_fixes(fixes, example_inputs),
        home=state.home,
    )
    document = outcome.document
    if as_json:
        sys.stdout.write(json.dumps(document) + "\n")
    else:
        _print_reports(document["targets"], document["model"], document.get("routes") or {})
        from ondevice_farm.reports.runtimes import print_runtimes, runtime_rows

        print_runtimes(stdout_console(), runtime_rows(document["targets"]))
    if outcome.first_failure is not None and not report_only:
        failed = ", ".join(outcome.failed)
        click.echo(
            f"farm: error: {len(outcome.failed)} of {outcome.asked} targets failed: {failed}", err=True
        )
        sys.exit(outcome.first_failure.exit_code)


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
