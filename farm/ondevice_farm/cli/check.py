"""`farm check model.onnx --targets ...`: which ops will not run on each accelerator, before any device."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ondevice_farm.cli.context import CliState, handles_errors

if TYPE_CHECKING:
    from rich.console import Console

    from ondevice_farm.preflight import Prediction

DEFAULT_CHECK_TARGETS = "ort/nnapi,ort/xnnpack,ort/qnn,coreml/ane"

#: how the table names the graph a target was checked on (`Prediction.graph_checked`)
GRAPH_LABELS = {"model": "model", "ort-basic": "ORT basic"}


@click.command("check")
@click.argument("model", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--targets",
    "-t",
    default=DEFAULT_CHECK_TARGETS,
    show_default=True,
    help="Comma-separated targets to check (runtime/backend).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.pass_obj
@handles_errors
def check(state: CliState, model: Path, targets: str, as_json: bool) -> None:
    """Pre-flight: predict, from documented operator support, which ops fall back to the CPU."""
    del state
    from ondevice_farm.preflight import predict
    from ondevice_farm.targets import parse_targets

    parsed = parse_targets(targets) or []
    predictions = predict(model, parsed)
    if as_json:
        sys.stdout.write(
            json.dumps({"model": str(model), "targets": [p.to_dict() for p in predictions]}) + "\n"
        )
        return
    from ondevice_farm.reports.terminal import stdout_console

    print_predictions(model, predictions, stdout_console())


def print_predictions(model: Path, predictions: list[Prediction], console: Console) -> None:
    from rich.table import Table

    table = Table(title=f"Pre-flight: {model.name}", title_justify="left")
    for column, justify in (
        ("target", "left"),
        ("nodes checked", "right"),
        ("will not run there", "left"),
        ("conditional", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for p in predictions:
        if not p.known:
            table.add_row(p.target, "-", "; ".join(p.notes), "-")
            continue
        by_type: dict[str, int] = {}
        for u in p.unsupported:
            by_type[u.op_type] = by_type.get(u.op_type, 0) + 1
        missing = ", ".join(f"{t} x{n}" for t, n in sorted(by_type.items())) or "none"
        checked = f"{p.nodes_checked} ({GRAPH_LABELS.get(p.graph_checked, p.graph_checked)})"
        table.add_row(p.target, checked, missing, str(len(p.conditional)))
    console.print(table)
    for p in predictions:
        if not p.known:
            continue
        console.print(f"{p.target}: {p.source}", highlight=False, soft_wrap=True)
        for note in p.notes:
            console.print(f"  {note}", style="dim", highlight=False)
        if p.conditional:
            console.print(
                f"  conditional: taken only where a condition holds that pre-flight cannot check "
                f"({len(p.conditional)} nodes):",
                highlight=False,
            )
            for op_type, condition, count in p.conditional_by_rule():
                console.print(f"    {op_type} x{count}: {condition}", highlight=False)
