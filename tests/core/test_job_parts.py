"""A job document split into its summary and bulky parts, and joined again."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ondevice_farm.job_parts import (
    BULKY_JOB_KEYS,
    join_job,
    needs_parts,
    part_name,
    parts_at,
    split_job,
    value_at,
)

REPO = Path(__file__).resolve().parents[2]
RECORDED_JOB = REPO / "tests/report/fixtures/host/tinynet_busy_host.json"


def test_a_recorded_job_splits_into_a_small_summary_and_joins_whole() -> None:
    job: dict[str, Any] = json.loads(RECORDED_JOB.read_text())["jobs"][0]
    original = copy.deepcopy(job)
    summary, parts = split_job(job)
    assert job == original  # split copies along the paths it cuts; the document is untouched
    assert set(parts) == {"trace_events", "ops", "compile.node_placement"}
    assert (
        "trace_events" not in summary and "ops" not in summary and "node_placement" not in summary["compile"]
    )
    assert summary["fallback_ops"] == job["fallback_ops"] and summary["reference"] == job["reference"]
    assert len(json.dumps(summary)) * 5 < len(json.dumps(job))
    joined = join_job(summary, json.loads(json.dumps(parts)))  # as the store keeps them: JSON
    assert joined == job
    assert "trace_events" not in summary  # join copies too


def test_per_session_samples_go_and_everything_else_of_latency_stays() -> None:
    job = {
        "ops": None,  # present but null: comes back present and null
        "latency_ms": {
            "p50": 1.0,
            "samples": [1.0, 2.0],
            "repeats": [{"p50": 1.0, "samples": [1.0]}, {"p50": 2.0}, "odd", {"p50": 3.0, "samples": []}],
        },
    }
    summary, parts = split_job(job)
    assert parts == {"ops": None, "latency_ms.repeats.0.samples": [1.0], "latency_ms.repeats.3.samples": []}
    assert summary == {
        "latency_ms": {
            "p50": 1.0,
            "samples": [1.0, 2.0],
            "repeats": [{"p50": 1.0}, {"p50": 2.0}, "odd", {"p50": 3.0}],
        }
    }
    assert join_job(summary, parts) == job


def test_a_job_without_bulky_keys_has_no_parts() -> None:
    failed = {"job_id": "j", "status": "failed", "error": "boom", "latency_ms": "not a dict", "compile": []}
    summary, parts = split_job(failed)
    assert (summary, parts) == (failed, {})
    assert join_job(summary, None) == failed


def test_which_paths_reach_into_the_parts() -> None:
    assert {"trace_events", "ops"} <= set(BULKY_JOB_KEYS)
    reaching = ("$.ops", "$.ops[0].name", "$.trace_events", "$.latency_ms", "$.latency_ms.repeats",
                "$.latency_ms.repeats[2].samples", "$.compile", "$.compile.node_placement", "$")  # fmt: skip
    for path in reaching:
        assert needs_parts(path), path
    for path in ("$.latency_ms.p50", "$.latency_ms.samples", "$.latency_ms.repeats[0].p50",
                 "$.compile.fusions", "$.fallback_ops", "$.opsx", "$.reference.status"):  # fmt: skip
        assert not needs_parts(path), path


def test_values_at_paths_as_sqlite_json_extract_reads_them() -> None:
    doc = {"a": {"b": [10, {"c": None}]}, "n": 0}
    assert value_at(doc, "$.a.b[0]") == 10
    assert value_at(doc, "$.a.b[1].c") is None
    assert value_at(doc, "$.a.b[5]") is None
    assert value_at(doc, "$.a.b.c") is None
    assert value_at(doc, "$.n.x") is None
    assert value_at(doc, "$.n") == 0


def test_each_part_belongs_to_one_bulky_key() -> None:
    assert part_name("ops") == "ops"
    assert part_name("latency_ms.repeats.3.samples") == "latency_ms.repeats[].samples"
    assert part_name("compile.node_placement") == "compile.node_placement"
    with pytest.raises(ValueError, match="no bulky part"):
        part_name("latency_ms.samples")
    assert parts_at("$.compile") == ("compile.node_placement",)
    assert parts_at("$.ops[3].name") == ("ops",)
    assert parts_at("$.latency_ms.p50") == ()
    assert set(parts_at("$")) == set(BULKY_JOB_KEYS)
