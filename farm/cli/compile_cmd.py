"""`farm compile MODEL --targets ...`: the compile reports alone, no device."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from farm.cli.context import CliState, handles_errors
from farm.errors import FarmError, UsageError
from farm.inputs import parse_shapes, resolve_shapes
from farm.reports.terminal import stdout_console
from farm.targets import parse_targets


@click.command("compile")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--targets", "-t", default="ort/cpu", show_default=True, help="Comma-separated targets.")
@click.option("--shape", "shapes", multiple=True, help="Input shape for dynamic dims: name=1x3x224x224.")
@click.option("--coreml-precision", type=click.Choice(["fp16", "fp32"]), default="fp16", show_default=True)
@click.option(
    "--coreml-quantization",
    type=click.Choice(["keep", "float"]),
    default="keep",
    show_default=True,
    help="QDQ models on CoreML: keep 8-bit weights and activations, or fold them to float.",
)
@click.option("--report-only", is_flag=True, help="Report unsupported ops instead of failing on them.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.pass_obj
@handles_errors
def compile_command(
    state: CliState,
    model: Path,
    targets: str,
    shapes: tuple[str, ...],
    coreml_precision: str,
    coreml_quantization: str,
    report_only: bool,
    as_json: bool,
) -> None:
    """Compile MODEL for each target and print what the compiler did."""
    from farm.artifacts import ArtifactStore
    from farm.compile import compile_for_target
    from farm.compile.precision import describe as describe_precision
    from farm.model import inspect_model

    wanted = parse_targets(targets)
    if not wanted:
        raise UsageError("--targets is empty")
    info = inspect_model(model)
    input_shapes = resolve_shapes(info, parse_shapes(shapes))
    store = ArtifactStore(state.home.ensure().artifacts)
    reports: list[dict[str, Any]] = []
    for target in wanted:
        try:
            artifact = compile_for_target(
                model,
                target,
                store,
                input_shapes=input_shapes,
                coreml_precision=coreml_precision,
                coreml_quantization=coreml_quantization,
            )
        except FarmError as exc:
            if not report_only:
                raise
            reports.append({"target": target.name, "error": exc.message})
            continue
        reports.append(
            {
                "target": target.name,
                "artifact": str(artifact.path),
                "sha256": artifact.sha256,
                "report": artifact.report.to_dict(),
            }
        )
    if as_json:
        sys.stdout.write(
            json.dumps({"model": {"name": info.name, "sha256": info.sha256}, "targets": reports}) + "\n"
        )
        return
    console = stdout_console()
    for entry in reports:
        if "error" in entry:
            console.print(f"[bold]{entry['target']}[/bold]: [red]{entry['error']}[/red]")
            continue
        rep = entry["report"]
        console.print(
            f"[bold]{entry['target']}[/bold]: {rep['nodes_before']} nodes -> {rep['nodes_after']}, "
            f"precision {rep['precision']}, partitions {rep['partitions']}, artifact {entry['artifact']}"
        )
        if rep.get("op_precision"):
            console.print(f"  op precision: {describe_precision(rep['op_precision'])}")
        size = rep.get("extra", {}).get("package_bytes")
        if size is not None:
            weights = rep["extra"].get("weight_bytes") or {}
            held = ", ".join(f"{dtype} {count / 1024:.1f} KiB" for dtype, count in weights.items())
            console.print(f"  package {size / 1024:.1f} KiB" + (f" (weights: {held})" if held else ""))
        changes = ", ".join(f"{f['op_type']} {f['before']}->{f['after']}" for f in rep["fusions"])
        if changes:
            console.print(f"  op changes: {changes}")
        if rep["placement"]:
            console.print(f"  placement: {rep['placement']}")
        if rep["fallback_ops"]:
            console.print(f"  [yellow]CPU fallbacks[/yellow]: {', '.join(rep['fallback_ops'])}")
        for note in rep["notes"]:
            console.print(f"  [dim]note: {note}[/dim]")
