"""`farm diverge --on-device`: per-layer curves of a run's phone jobs, measured on their own devices
(`ondevice_farm.controller.layer_probe`): ONNX Runtime jobs in place of "needs the device", CoreML
jobs in place of the host MIL executor's prediction."""

from __future__ import annotations

import os
from pathlib import Path

from ondevice_farm.analysis.divergence import DivergenceCurve, search_divergence
from ondevice_farm.analysis.intermediates import layer_points
from ondevice_farm.cli.context import CliState
from ondevice_farm.cli.submit import StderrProgress
from ondevice_farm.errors import FarmError, UsageError
from ondevice_farm.reports.document import Report
from ondevice_farm.reports.layers import snr_floor_db


def measure_on_devices(
    state: CliState,
    run: dict[str, object],
    report: Report,
    *,
    budget: int,
    adb: tuple[str, ...],
    address: str | None,
) -> None:
    """Adds a measured curve to `report.layers` for every job its layers were missing for because
    they needed the device, and for every CoreML job (replacing its predicted curve); says why
    where one could not be measured."""
    import onnx

    from ondevice_farm.cli.context import fleet_settings
    from ondevice_farm.controller.cluster import ClusterConfig
    from ondevice_farm.controller.layer_probe import device_measure, layer_note
    from ondevice_farm.reports.document import locate_model

    model_path = locate_model(run, None, state.home.artifacts)
    if model_path is None:
        raise UsageError("the run's source model is not found", hint="pass --model")
    wanted = [
        c
        for c in report.columns
        if c.ok
        and (
            (c.target.startswith("ort/") and c.label in report.layers_missing)
            or c.target.startswith("coreml/")
        )
    ]
    if not wanted:
        return
    profiles, settings = fleet_settings(state, adb)
    cluster = ClusterConfig(address=address or os.environ.get("RAY_ADDRESS") or None)
    points = layer_points(onnx.load(str(Path(model_path))))
    for column in wanted:
        floor = snr_floor_db(column.target, column.precision)
        runners: list[str] = []
        measure = device_measure(
            Path(model_path),
            dict(run),
            column.job,
            floor,
            home=state.home,
            profiles=profiles,
            settings=settings,
            cluster=cluster,
            progress=StderrProgress(),
            store=state.store,
            runners=runners,
        )
        try:
            layers, first, method, runs = search_divergence(points, measure, budget=budget)
        except FarmError as exc:
            report.layers_missing[column.label] = f"measuring on the device failed: {exc.message}"
            continue
        report.layers_missing.pop(column.label, None)
        # a CoreML job's predicted curve gives way to the one measured on its device
        report.layers = [c for c in report.layers or [] if c.label != column.label]
        report.layers.append(
            DivergenceCurve(
                label=column.label,
                target=column.target,
                precision=column.precision,
                source="measured",
                method=method,
                runs=runs,
                snr_floor_db=floor,
                layers=layers,
                first=first,
                backend=None,
                note=layer_note(runners[-1] if runners else ""),
            )
        )
