"""Terminal view of per-layer error curves, shared by `farm diverge` and `farm report --layers`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ondevice_farm.cli.context import CliState
from ondevice_farm.errors import UsageError
from ondevice_farm.targets_on_host import FP16_ORT_TARGETS, predicted_on_host

if TYPE_CHECKING:
    from rich.console import Console

    from ondevice_farm.analysis.divergence import DivergenceCurve
    from ondevice_farm.reports.document import LayerRequest

#: rows of each job's table shown in the terminal (the HTML report shows more)
TERMINAL_ROWS = 8


def layer_request(state: CliState, budget: int, predict: str | None = None) -> LayerRequest:
    from ondevice_farm.reports.document import LayerRequest
    from ondevice_farm.targets import parse_targets

    asked = parse_targets(predict) or []
    targets = tuple(t.name for t in asked)
    wrong = [t.name for t in asked if not predicted_on_host(t)]
    if wrong:
        raise UsageError(
            f"cannot predict {', '.join(wrong)} on the host",
            hint=f"--predict takes coreml/* targets and {', '.join(FP16_ORT_TARGETS)} (as fp16 storage)",
        )
    hosts = frozenset(name for name, profile in state.profiles().items() if profile.platform == "host")
    return LayerRequest(host_devices=hosts, budget=budget, predict=targets)


def print_layers(console: Console, curves: list[DivergenceCurve], missing: dict[str, str]) -> None:
    from rich.table import Table

    for curve in curves:
        console.print(f"[bold]{curve.label}[/bold]: {curve.finding()}", highlight=False)
        console.print(
            f"  {curve.source}; {curve.method}, {curve.runs} run(s) of the target; "
            f"tolerance SNR >= {curve.snr_floor_db:g} dB",
            style="dim",
            highlight=False,
        )
        table = Table(box=None, pad_edge=False)
        for column, justify in (("depth", "right"), ("node", "left"), ("op", "left"), ("SNR dB", "right")):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for layer in curve.shown(TERMINAL_ROWS):
            snr = f"{layer.nonfinite} inf/NaN" if layer.snr_db is None else f"{layer.snr_db:.1f}"
            marker = " <- first" if curve.first is not None and layer.point == curve.first.point else ""
            table.add_row(str(layer.point.depth), layer.point.node + marker, layer.point.op_type, snr)
        console.print(table)
    for label, reason in sorted(missing.items()):
        console.print(f"{label}: no per-layer curve: {reason}", style="dim", highlight=False)
