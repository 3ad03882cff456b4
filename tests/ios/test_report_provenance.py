"""An iOS run's reports say which figures are estimates: per-op times come from MLComputePlan's
cost weights, placement is the plan's preferred device. The job document and its schema carry
that; the terminal table and the HTML report (opened in headless Chromium) show "est." cells,
a legend and the job's notes; the fallback finding says its time is estimated."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from rich.console import Console

from ondevice_farm.analysis.job import job_document
from ondevice_farm.analysis.numeric import default_tolerance
from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.compile import compile_for_target
from ondevice_farm.reports.html import render_html
from ondevice_farm.reports.terminal import render_run
from ondevice_farm.targets import Target
from ondevice_farm_agents.base import RunRequest
from ondevice_farm_agents.ios.agent import IosAgent
from tests.report.chromium import CHROMIUM, open_page

from .renamed_model import renamed_inputs, write_renamed_model

pytest.importorskip("coremltools")
ANE = Target.parse("coreml/ane")


@pytest.fixture
def ios_run(ios_agent: IosAgent, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    model = write_renamed_model(tmp_path / "torch_named.onnx")
    artifact = compile_for_target(model, ANE, ArtifactStore(tmp_path / "artifacts"))
    (unit,) = ios_agent.discover()
    request = RunRequest(
        artifact=artifact.path, artifact_sha256=artifact.sha256, target=ANE, inputs=renamed_inputs(),
        warmup=1, runs=3, io_names=artifact.io_names,
    )  # fmt: skip
    run = ios_agent.run(unit, request)
    from ondevice_farm.reference import reference_outputs

    reference = reference_outputs(model, "torch-named", request.inputs, tmp_path / "refs")
    now = time.time()
    base = {
        "job_id": "20261201-120000-abcdef-ios", "run_id": "20261201-120000-abcdef",
        "model": {"name": "torch_named", "sha256": "0" * 64},
        "device": "iphone15", "unit": unit.serial, "target": ANE.name, "requested": "iphone15",
        "queued_at": now - 2, "started_at": now - 1, "finished_at": now, "duration_s": 1.0,
        "attempts": [{"unit": unit.serial, "error": None}],
    }  # fmt: skip
    job = job_document(
        base=base,
        target=ANE,
        artifact=artifact,
        run=run,
        reference=reference,
        tolerance=default_tolerance(ANE),
    )
    document = {
        "run_id": "20261201-120000-abcdef",
        "kind": "submit",
        "model": {"name": "torch_named", "sha256": "0" * 64, "path": str(model), "opset": 17, "nodes": 4,
                  "inputs": [], "outputs": []},
        "settings": {},
        "status": "complete",
        "jobs": [job],
    }  # fmt: skip
    return document, model


def test_the_job_document_says_how_each_figure_was_obtained(ios_run: tuple[dict[str, Any], Path]) -> None:
    document, _ = ios_run
    (job,) = document["jobs"]
    provenance = job["provenance"]
    assert (provenance["latency"], provenance["op_times"], provenance["placement"]) == (
        "measured", "estimated", "planned"
    )  # fmt: skip
    assert "estimated_cost" in provenance["formulas"]["op_times"]
    assert {op["time_source"] for op in job["ops"]} == {"estimated"}
    assert {op["placement_source"] for op in job["ops"]} == {"planned"}
    schema = json.loads(
        (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
    )
    jsonschema.Draft202012Validator(schema).validate(document)
    bad = {**job, "ops": [{**job["ops"][0], "time_source": "guessed"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate({**document, "jobs": [bad]})


def test_the_terminal_table_marks_estimates_and_says_how(ios_run: tuple[dict[str, Any], Path]) -> None:
    document, _ = ios_run
    console = Console(width=160, record=True)
    console.print(render_run(document))
    text = console.export_text()
    assert "est. " in text  # every per-op time cell
    assert "(planned)" in text
    assert "per-op times: estimated: mean_us = MLComputePlan estimated_cost" in text
    assert "note: per-op times are MLComputePlan estimated-cost shares" in text


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium")
def test_the_html_report_shows_the_legend_an_est_cell_and_the_notes(
    ios_run: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    document, model = ios_run
    page = tmp_path / "ios.html"
    page.write_text(render_html(document, model_path=model, predict_precision=False))
    visible = "(function (el) { if (!el) return false; var r = el.getBoundingClientRect();"
    visible += " return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== 'hidden'; })"
    probes = {
        "legend": visible + "(document.querySelector('.legend'))",
        "legend_text": "document.querySelector('.legend').textContent",
        "est_cell": visible + "(Array.from(document.querySelectorAll('td')).find("
        "td => td.textContent.startsWith('est. ')))",
        "est_cells": "Array.from(document.querySelectorAll('td span.est')).length",
        "notes": "Array.from(document.querySelectorAll('ul.notes li')).map(li => li.textContent)",
        "footer": "document.querySelector('footer').textContent",
    }
    result = open_page(page, probes)
    assert result.console_errors == []
    values = result.values
    assert values["legend"] is True and "MLComputePlan" in values["legend_text"]
    assert values["est_cell"] is True and values["est_cells"] >= 1
    assert any("estimated-cost shares" in note for note in values["notes"])
    assert "Measured values come from" not in values["footer"]
