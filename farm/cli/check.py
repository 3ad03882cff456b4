"""`farm check model.onnx --targets ...`: which ops will not run on each accelerator, before any device."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from farm.cli.context import CliState, handles_errors

DEFAULT_CHECK_TARGETS = "ort/nnapi,ort/xnnpack,ort/qnn,coreml/ane"


@click.command("check")
@click.argument("model", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--targets",
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
    from farm.preflight import predict
    from farm.targets import parse_targets

    parsed = parse_targets(targets) or []
    predictions = predict(model, parsed)
    if as_json:
        sys.stdout.write(
            json.dumps({"model": str(model), "targets": [p.to_dict() for p in predictions]}) + "\n"
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Pre-flight: {model.name}", title_justify="left")
    for column in ("target", "nodes checked", "will not run there", "conditional"):
        table.add_column(column)
    for p in predictions:
        if not p.known:
            table.add_row(p.target, "-", "; ".join(p.notes), "-")
            continue
        by_type: dict[str, int] = {}
        for u in p.unsupported:
            by_type[u.op_type] = by_type.get(u.op_type, 0) + 1
        missing = ", ".join(f"{t} x{n}" for t, n in sorted(by_type.items())) or "none"
        table.add_row(p.target, str(p.nodes_checked), missing, str(len(p.conditional)))
    console = Console()
    console.print(table)
    for p in predictions:
        if p.known:
            console.print(f"  {p.target}: {p.source}", style="dim", highlight=False, soft_wrap=True)
