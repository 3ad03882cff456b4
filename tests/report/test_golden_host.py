"""The report of real host runs, through `farm report` on the store the runs were written to."""

from __future__ import annotations

import json
from pathlib import Path

from ondevice_farm.reports.trace import validate_trace
from tests.report.conftest import TINYNET, HostRuns, farm


def _report(host_runs: HostRuns, *args: str) -> dict:  # type: ignore[type-arg]
    done = farm(host_runs.home, "report", host_runs.first["run_id"], "--json", "--model", str(TINYNET), *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_one_run_side_by_side_holds_the_stored_measurements(host_runs: HostRuns) -> None:
    report = _report(host_runs)
    job = host_runs.first["jobs"][0]
    [column] = report["columns"]
    assert column["label"] == "host-cpu ort/cpu"
    assert column["latency_ms"]["p50"] == job["latency_ms"]["p50"]
    assert column["samples_ms"] == job["latency_ms"]["samples"] and len(column["samples_ms"]) == 5
    assert column["first_inference_ms"] == job["first_inference_ms"]
    assert column["peak_memory_mb"] == job["peak_memory_mb"]
    assert (column["nodes_before"], column["nodes_after"]) == (61, job["compile"]["nodes_after"])
    assert column["placement"] == {"CPU": len(job["ops"])}
    assert column["fallbacks"] == [] and column["precision"] == "fp32"
    assert column["reference"]["passed"] is True


def test_alignment_maps_every_source_node_to_a_profiled_kernel(host_runs: HostRuns) -> None:
    rows = _report(host_runs)["alignment"]["rows"]
    covered = [name for row in rows for name in row["sources"]]
    assert len(covered) == 61 and len(set(covered)) == 61
    first = rows[0]
    # Conv -> BatchNormalization -> Clip ran as one NCHWc Conv named after the Clip's output
    assert first["sources"] == ["Conv_1", "BatchNormalization_2", "Clip_3"]
    cell = first["targets"]["host-cpu ort/cpu"]
    assert cell["kernel"] == "Clip_3.out_nchwc" and cell["op_type"] == "Conv" and cell["backend"] == "CPU"
    # the kernel's time by the statistic its share is of: the median per profiled run
    op = next(op for op in host_runs.first["jobs"][0]["ops"] if op["name"] == "Clip_3.out_nchwc")
    assert op["share_of"] == "median_us" and cell["time_us"] == op["median_us"]
    residual = next(row for row in rows if "Add_12" in row["sources"])
    assert residual["uncertain"]["host-cpu ort/cpu"] == ["Add_12"]


def test_against_a_second_run_puts_both_side_by_side(host_runs: HostRuns) -> None:
    report = _report(host_runs, "--against", host_runs.second["run_id"])
    labels = [c["label"] for c in report["columns"]]
    assert len(labels) == 2 and labels[0] != labels[1]
    assert all(label.startswith("host-cpu ort/cpu [") for label in labels)
    assert report["against"] == host_runs.second["run_id"]
    assert report["fusion_differences"] == []  # one compiler, one model: the same fusions
    a, b = (c["latency_ms"]["p50"] for c in report["columns"])
    moved = [f for f in report["findings"] if f["rule"] == "run_regression"]
    if abs(a - b) / b >= 0.10:
        assert moved and moved[0]["evidence"]["p50_ms"] == [a, b]
    else:
        assert not moved


def test_trace_files_are_valid_trace_event_json(host_runs: HostRuns, tmp_path: Path) -> None:
    done = farm(host_runs.home, "report", host_runs.first["run_id"], "--trace", str(tmp_path / "traces"))
    assert done.returncode == 0, done.stderr
    files = sorted((tmp_path / "traces").glob("*.trace.json"))
    assert [f.name for f in files][-1] == "run.trace.json" and len(files) == 2
    job = host_runs.first["jobs"][0]
    for path in files:
        document = json.loads(path.read_text())
        assert validate_trace(document) == []
        kernels = [e for e in document["traceEvents"] if e["ph"] == "X"]
        assert len(kernels) == len(job["trace_events"])
        assert {e["name"] for e in kernels} == {op["name"] for op in job["ops"]}
        lanes = {e["args"]["name"] for e in document["traceEvents"] if e["name"] == "thread_name"}
        assert lanes == {"CPU"}


def test_html_is_self_contained(host_runs: HostRuns, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = farm(
        host_runs.home,
        "report",
        host_runs.first["run_id"],
        "--html",
        str(out),
        "--against",
        host_runs.second["run_id"],
    )
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    assert html.count("<svg") >= 4 and "<table" in html
    for external in ('src="http', "src='http", 'href="http', "@import", "url(http"):
        assert external not in html


def test_terminal_puts_two_runs_side_by_side(host_runs: HostRuns) -> None:
    done = farm(host_runs.home, "report", host_runs.first["run_id"], "--against", host_runs.second["run_id"])
    assert done.returncode == 0, done.stderr
    assert "Side by side" in done.stdout
    for run in (host_runs.first, host_runs.second):
        p50 = run["jobs"][0]["latency_ms"]["p50"]
        assert f"{p50:.3f}" in done.stdout  # each run's measured p50 is in its column
    assert "nodes before -> after" in done.stdout and "61 -> 25" in done.stdout
