"""The report on recorded device results (fixtures/recorded, with provenance in its README)."""

from __future__ import annotations

from pathlib import Path

from ondevice_farm.reports.document import build_report
from ondevice_farm.reports.trace import job_trace_events, trace_document, validate_trace
from tests.report.recorded import (
    conv_resize_model,
    coreml_compute_plan_job,
    nnapi_partition_event,
    nnapi_resize_job,
    run_of,
)


def test_nnapi_placement_recording_shows_the_fallback_and_the_missed_prediction(tmp_path: Path) -> None:
    model = conv_resize_model(tmp_path / "conv_resize.onnx")
    report = build_report(run_of(nnapi_resize_job()), model_path=model).to_dict()
    [column] = report["columns"]
    assert column["placement"] == {"NNAPI": 1, "CPU": 1}
    assert column["fallbacks"][0]["name"] == "/Resize" and column["fallbacks"][0]["time_us"] is None
    assert column["fallback_share"] is None and column["latency_ms"] == {}
    rows = {
        row["sources"][0]: row["targets"]["galaxy-s23-ultra ort/nnapi"] for row in report["alignment"]["rows"]
    }
    assert rows["/conv/Conv"]["backend"] == "NNAPI" and rows["/Resize"]["backend"] == "CPU"
    assert {cell["certainty"] for cell in rows.values()} == {"placed"}
    # NNAPI documents 2D Resize as supported: the device refused it ("Input [] has no shape")
    [check] = report["preflight"]
    assert check["predicted"] == [] and check["unexpected"] == ["/Resize"]
    assert check["conditions"]["/Resize"] == "2D only"
    rules = [f["rule"] for f in report["findings"]]
    assert rules == ["cpu_fallbacks", "preflight_mismatch"]
    assert "1 op falls back to CPU on galaxy-s23-ultra ort/nnapi (/Resize)" in report["findings"][0]["text"]


def test_coreml_compute_plan_recording() -> None:
    report = build_report(run_of(coreml_compute_plan_job())).to_dict()
    [column] = report["columns"]
    assert column["placement"] == {"ANE": 5} and column["precision"] == "fp16"
    assert column["fallbacks"] == [] and report["alignment"] is None
    # no per-op cost in the recording: nothing to lay out in a trace, and nothing invented
    assert [e for e in job_trace_events(coreml_compute_plan_job()) if e["ph"] == "X"] == []


def test_recorded_nnapi_partition_event_normalises_to_a_valid_trace() -> None:
    job = dict(nnapi_resize_job(), trace_events=[nnapi_partition_event()])
    document = trace_document([job])
    assert validate_trace(document) == []
    [kernel] = [e for e in document["traceEvents"] if e["ph"] == "X"]
    assert kernel["name"] == "NnapiExecutionProvider_Nnapi_9273581279604050763_18_0"
    assert (kernel["ts"], kernel["dur"]) == (2229976.0, 1142369.0)
    lanes = {e["tid"]: e["args"]["name"] for e in document["traceEvents"] if e["name"] == "thread_name"}
    assert lanes[kernel["tid"]] == "NNAPI"


def test_trace_validation_names_what_is_missing() -> None:
    bad = {
        "traceEvents": [
            {"ph": "X", "name": "k", "ts": 1, "pid": 1, "tid": 1},
            {"ph": "M", "name": "thread_name", "pid": 1, "args": {}},
            {"name": "no phase"},
            {"ph": "X", "name": "k", "ts": "1", "dur": -1, "pid": 1, "tid": 1},
        ]
    }
    errors = validate_trace(bad)
    assert errors == [
        "event 0 (X): missing dur",
        "event 1: metadata needs a known name and args.name",
        "event 2: no ph",
        "event 3: ts is not a number",
        "event 3: negative dur",
    ]
    assert validate_trace([]) == ["not an object with a traceEvents array"]


def test_alignment_reads_core_ml_op_names(tmp_path: Path) -> None:
    """The farm's CoreML lowering names MIL values after the ONNX tensors they compute (a conv with
    its BatchNormalization folded in is `BatchNormalization_2_out_cast_fp16`); which device ran
    each op is made up here: this checks the name mapping only."""
    from ondevice_farm.reports.alignment import align, source_nodes
    from ondevice_farm.reports.compare import compare
    from tests.report.conftest import TINYNET
    from tests.report.crafted import job, run

    mil = job(
        "iphone",
        "coreml/ane",
        precision="fp16",
        ops=[
            ("image_to_fp16", "ios17.cast", "CPU", 5.0),
            ("BatchNormalization_2_out_cast_fp16", "ios17.conv", "ANE", 40.0),
            ("Clip_3_out_cast_fp16", "ios17.relu6", "ANE", 4.0),
        ],
    )
    [column] = compare(run(mil)).columns
    rows = {
        tuple(r.sources[i].name for i in range(len(r.sources))): r.cells.get(column.label)
        for r in align(source_nodes(TINYNET), [column]).rows
    }
    conv = rows[("Conv_1", "BatchNormalization_2")]
    assert conv is not None and (conv.kernel, conv.backend, conv.certainty) == (
        "BatchNormalization_2_out_cast_fp16",
        "ANE",
        "exact",
    )
    clip = rows[("Clip_3",)]
    assert clip is not None and clip.op_type == "ios17.relu6" and clip.certainty == "exact"
    # a Conv with no kernel of its own in a partial profile is missing, not folded into a ReLU
    missing = rows[("Conv_4",)]
    assert missing is not None and missing.certainty == "absent"
