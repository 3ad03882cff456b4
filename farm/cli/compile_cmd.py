"""`farm compile MODEL --targets ...`: the compile reports alone, no device."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from farm.cli.context import CliState, handles_errors
from farm.compile.placement import short_provider
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
    coreml_precision: str,
    report_only: bool,
    as_json: bool,
) -> None:
    """Compile MODEL for each target and print what the compiler did."""
    from farm.artifacts import ArtifactStore
    from farm.compile import compile_for_target
    from farm.model import inspect_model

    wanted = parse_targets(targets)
    if not wanted:
        raise UsageError("--targets is empty")
    info = inspect_model(model)
    input_shapes = resolve_shapes(info, parse_shapes(shapes))
    store = ArtifactStore(state.home.ensure().artifacts)
    reports: list[dict[str, Any]] = []
    # One target's failure (a missing coremltools, an op its lowering refuses) says nothing about
    # the others: every target is compiled, each failure reported with its hint, and the command
    # exits with the first failure's code once all are shown.
    first_failure: FarmError | None = None
    for target in wanted:
        try:
            artifact = compile_for_target(
                model, target, store, input_shapes=input_shapes, coreml_precision=coreml_precision
            )
        except FarmError as exc:
            first_failure = first_failure or exc
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
    if as_json:
        sys.stdout.write(
            json.dumps({"model": {"name": info.name, "sha256": info.sha256}, "targets": reports}) + "\n"
        )
    else:
        _print_reports(reports)
    if first_failure is not None and not report_only:
        failed = [entry["target"] for entry in reports if "error" in entry]
        click.echo(
            f"farm: error: {len(failed)} of {len(reports)} targets failed: {', '.join(failed)}", err=True
        )
        sys.exit(first_failure.exit_code)


def _print_reports(reports: list[dict[str, Any]]) -> None:
    console = stdout_console()
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
        changes = ", ".join(f"{f['op_type']} {f['before']}->{f['after']}" for f in rep["fusions"])
        if changes:
            console.print(f"  op changes: {changes}", highlight=False)
        if rep["placement"]:
            # placement is recorded on the graph ONNX Runtime partitions, after its basic
            # optimisations: `farm check` counts the same graph ("ORT basic")
            placed = sum(int(n) for n in rep["placement"].values())
            per_provider = ", ".join(f"{short_provider(p)} {n}" for p, n in sorted(rep["placement"].items()))
            console.print(
                f"  nodes per provider as partitioned ({placed}, after basic optimisations): {per_provider}",
                highlight=False,
            )
        console.print(f"  artifact: {entry['artifact']}", highlight=False, soft_wrap=True)
        if rep["fallback_ops"]:
            console.print(f"  [yellow]CPU fallbacks[/yellow]: {', '.join(rep['fallback_ops'])}")
        for note in rep["notes"]:
            console.print(f"  [dim]note: {note}[/dim]")
