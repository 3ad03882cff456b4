"""A job whose runner returns no outputs is `not_compared`, with its reason, everywhere: the job
document, the store (also documents stored before the three states), /metrics (no
farm_reference_passed series), the terminal, the HTML report, the findings, the nightly's
latency comparison, and `farm submit`'s exit code.

The runner here is onnxruntime_perf_test: its numbers come from a recorded real output
(tests/android/fixtures/perf_test/, parsed by the Android agent's own parser); the model is
compiled and its reference computed for real on this host."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from rich.console import Console

from ondevice_farm.analysis.job import job_document
from ondevice_farm.analysis.regression import compare_jobs
from ondevice_farm.analysis.tolerance import default_tolerance
from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.cli.submit import reference_failure
from ondevice_farm.compile import compile_for_target
from ondevice_farm.inputs import resolve_shapes, seeded_inputs
from ondevice_farm.metrics.collector import FarmCollector, farm_registry
from ondevice_farm.model import inspect_model
from ondevice_farm.reference import reference_model_entry, reference_outputs
from ondevice_farm.reports.compare import compare
from ondevice_farm.reports.findings import find
from ondevice_farm.reports.html import render_html
from ondevice_farm.reports.terminal import render_run
from ondevice_farm.store import MIGRATIONS, ResultsStore
from ondevice_farm.targets import Target
from ondevice_farm_agents.android import perf_test
from ondevice_farm_agents.base import DeviceRun

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "farm/ondevice_farm/schema/run.schema.json").read_text())
RECORDED = REPO / "tests/android/fixtures/perf_test/android_vivo_x300_sme2_resnet50v2.txt"
RUN_ID = "20260101-000000-abcdef"
SERIES = {"model": "tinynet", "device": "pixel8", "target": "ort/cpu"}


def perf_test_run() -> DeviceRun:
    """What the perf_test runner kind hands the controller
    (agents/ondevice_farm_agents/android/runners.py)."""
    summary = perf_test.parse_output(RECORDED.read_text())
    assert summary.session_creation_ms is not None and summary.average_ms is not None
    return DeviceRun(
        load_ms=summary.session_creation_ms,
        first_inference_ms=summary.first_inference_ms if summary.first_inference_ms is not None else math.nan,
        samples_ms=[],
        outputs={},
        peak_memory_bytes=summary.peak_working_set_bytes,
        runner="onnxruntime_perf_test (/data/local/tmp/farm/bin/onnxruntime_perf_test)",
        latency_summary_ms={**summary.latency_ms, "mean": summary.average_ms},
    )


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("home")
    info = inspect_model(REPO / "examples" / "tinynet.onnx")
    target = Target.parse("ort/cpu")
    artifact = compile_for_target(info.path, target, ArtifactStore(home / "artifacts"))
    shapes = resolve_shapes(info, {})
    inputs = seeded_inputs(info, shapes, 0)
    reference = reference_outputs(info.path, info.sha256, inputs, home / "references")
    job = job_document(
        base={
            "job_id": f"{RUN_ID}-000001",
            "run_id": RUN_ID,
            "model": {"name": info.name, "sha256": info.sha256},
            "device": "pixel8",
            "unit": "35011FDH2000AB",
            "target": target.name,
            "finished_at": 1.0,
        },
        target=target,
        artifact=artifact,
        run=perf_test_run(),
        reference=reference,
        tolerance=default_tolerance(target, artifact.report.precision),
        reference_model=reference_model_entry(info, False),
    )
    return {
        "run_id": RUN_ID,
        "kind": "submit",
        "status": "complete",
        "model": {
            "name": info.name,
            "sha256": info.sha256,
            "opset": info.opset,
            "nodes": info.node_count,
            "inputs": [
                {"name": n, "shape": list(s), "dtype": str(inputs[n].dtype)} for n, s in shapes.items()
            ],
            "outputs": [{"name": o.name, "dtype": o.dtype} for o in info.outputs],
        },
        "settings": {},
        "jobs": [job],
    }


def test_the_job_document_says_not_compared_and_why(document: dict[str, Any]) -> None:
    jsonschema.validate(document, SCHEMA)
    (job,) = document["jobs"]
    reference = job["reference"]
    assert (reference["status"], reference["passed"]) == ("not_compared", None)
    why = "onnxruntime_perf_test measures latency only and returns no outputs to compare"
    assert reference["reason"] == why
    assert reference["outputs"] == {} and reference["missing_outputs"] == [] and reference["failures"] == []
    assert reference_failure(document["jobs"]) is None  # `farm submit` exits 0 for it


def _registry(path: Path) -> Any:
    return farm_registry(FarmCollector(path))


def test_metrics_have_no_passed_series_for_it(document: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    with ResultsStore(path) as store:
        store.start_run(RUN_ID, "submit", {})
        store.add_job(RUN_ID, document["jobs"][0])
        store.finish_run(RUN_ID, "complete")
    registry = _registry(path)
    assert registry.get_sample_value("farm_reference_passed", SERIES) is None
    assert registry.get_sample_value("farm_reference_snr_db", SERIES) is None
    assert registry.get_sample_value("farm_reference_state", {**SERIES, "state": "not_compared"}) == 1
    assert registry.get_sample_value("farm_inference_latency_seconds", {**SERIES, "quantile": "0.5"}) > 0


def test_terminal_html_and_findings_say_not_compared(document: dict[str, Any]) -> None:
    console = Console(record=True, width=200)
    console.print(render_run(document))
    text = console.export_text()
    assert "not compared" in text and "FAIL" not in text
    assert "reference not compared: onnxruntime_perf_test measures latency only" in text
    html = render_html(document, predict_precision=False)
    assert '<span class="muted" title="onnxruntime_perf_test measures' in html and "not compared" in html
    findings = [f for f in find(compare(document)) if f.rule.startswith("reference")]
    assert [f.rule for f in findings] == ["reference_not_compared"]


def test_the_nightly_says_why_it_cannot_compare_latency(document: dict[str, Any]) -> None:
    (job,) = document["jobs"]
    (latency,) = [f for f in compare_jobs(job, job) if f.kind == "latency"]
    assert not latency.regression
    assert latency.message.startswith("latency not compared: the baseline job has 0 per-run sample(s) (")
    assert "onnxruntime_perf_test" in latency.message and "at least 2 on each side" in latency.message


def _old_document(job: dict[str, Any], job_id: str, reference: dict[str, Any]) -> dict[str, Any]:
    return {**job, "job_id": job_id, "reference": reference}


def test_documents_stored_before_the_three_states_are_migrated(
    document: dict[str, Any], tmp_path: Path
) -> None:
    """Schema 2 stored a perf_test job as failed (every output "missing"): after migration it is
    not_compared; an old passing job is passed, an old failing one failed; all still render."""
    (job,) = document["jobs"]
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        for script in MIGRATIONS[:2]:
            db.executescript(script)
        db.execute("PRAGMA user_version = 2")
        db.execute(
            "INSERT INTO runs(run_id, created_at, kind, status, document)"
            " VALUES (?, 0, 'submit', 'complete', '{}')",
            (RUN_ID,),
        )
        olds = {
            "perf": {"outputs": {}, "missing_outputs": ["probabilities"], "passed": False},
            "good": {"outputs": {"probabilities": {"snr_db": 120.0, "max_abs": 0.0}}, "passed": True},
            "bad": {"outputs": {"probabilities": {"snr_db": 12.0, "max_abs": 0.1}}, "passed": False},
        }
        for index, (name, reference) in enumerate(olds.items()):
            old = _old_document(job, f"{RUN_ID}-{name}", reference)
            old["target"] = ["ort/cpu", "ort/nnapi", "ort/xnnpack"][index]
            db.execute(
                "INSERT INTO jobs(job_id, run_id, model_name, model_sha256, device, target, status,"
                " finished_at, document) VALUES (?, ?, ?, ?, ?, ?, 'ok', ?, ?)",
                (old["job_id"], RUN_ID, "tinynet", job["model"]["sha256"], "pixel8", old["target"], index,
                 json.dumps(old)),
            )  # fmt: skip
    with ResultsStore(path) as store:
        assert store.schema_version == len(MIGRATIONS)
        migrated = {j["job_id"].rsplit("-", 1)[1]: j["reference"] for j in store.jobs(RUN_ID)}
    assert migrated["perf"] == {
        "outputs": {},
        "missing_outputs": ["probabilities"],
        "passed": None,
        "status": "not_compared",
        "reason": "the runner returned no outputs to compare",
    }
    assert (migrated["good"]["status"], migrated["bad"]["status"]) == ("passed", "failed")
    registry = _registry(path)
    assert registry.get_sample_value("farm_reference_passed", SERIES) is None
    state = registry.get_sample_value
    assert state("farm_reference_state", {**SERIES, "target": "ort/nnapi", "state": "passed"}) == 1
    assert state("farm_reference_state", {**SERIES, "target": "ort/xnnpack", "state": "failed"}) == 1
    console = Console(record=True, width=200)
    with ResultsStore(path) as store:
        jobs = store.jobs(RUN_ID)
    console.print(render_run({**document, "jobs": jobs}))
    text = console.export_text()
    assert "not compared" in text and "worst output probabilities at 12.0 dB SNR" in text
