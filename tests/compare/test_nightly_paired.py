"""The nightly runs a changed model's last good artifact beside it and judges it by the paired test."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from ondevice_farm.errors import UsageError
from ondevice_farm.nightly.suite import parse_suite
from tests.fleet.conftest import only_loopback
from tests.fleet.test_nightly_embedded import farm

from .conftest import matmul_chain

pytestmark = pytest.mark.slow


def test_a_changed_model_is_judged_beside_its_last_good_artifact(tmp_path: Path) -> None:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    home = tmp_path / "home"
    changing = matmul_chain(tmp_path / "changing.onnx", 6)
    matmul_chain(tmp_path / "steady.onnx", 3, seed=1)
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: paired-nightly\ndevices: [host-cpu]\nruns: 15\nwarmup: 2\nrepeats: 2\n"
        "models:\n  - changing.onnx\n  - steady.onnx\n"
        "regression: {paired_max_rounds: 12, paired_budget_s: 120}\n"
    )
    first = farm(home, "nightly", str(suite), "--json")
    assert first.returncode == 0, first.stderr[-2000:]

    # tonight's artifact does four times the work: at 0.03-0.1 ms a run, twice the work was once
    # judged not slower in CI, beside the other worker's load
    matmul_chain(changing, 24)
    second = farm(home, "nightly", str(suite), "--json")
    document = json.loads(second.stdout)
    entries = {e["model"]: e for e in document["comparison"]["jobs"]}
    changed = entries["changing"]
    # exit codes as documented: 1 on regression
    assert second.returncode == 1, (second.stderr[-2000:], changed.get("paired"), changed.get("reason"))
    assert changed["judged_by"] == "paired" and changed["verdict"] == "regressed"
    assert changed["paired"]["ratio"] > 1.4 and changed["paired"]["interval"][0] > 1.0
    assert changed["baseline_run"] == document["comparison"]["baseline_run"]
    job = next(j for j in document["jobs"] if j["model"]["name"] == "changing")
    first_job = next(j for j in json.loads(first.stdout)["jobs"] if j["model"]["name"] == "changing")
    assert job["paired_baseline"]["artifact_sha256"] == first_job["artifact_sha256"]
    # the suite's limits, not the defaults, bound the rounds
    assert (job["paired_baseline"]["max_rounds"], job["paired_baseline"]["budget_s"]) == (12, 120.0)
    assert changed["paired"]["rounds"] <= 12
    assert job["paired"]["rounds"] and {r["order"] for r in job["paired"]["rounds"]} <= {"AB", "BA"}
    schema = json.loads(
        (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
    )
    jsonschema.validate(job, {"$defs": schema["$defs"], "$ref": "#/$defs/ok_job"})
    # the model that did not change keeps the history test, and no paired rounds were run for it
    assert entries["steady"]["judged_by"] != "paired" and entries["steady"]["paired"] is None
    assert "paired" not in next(j for j in document["jobs"] if j["model"]["name"] == "steady")


def test_paired_limits_are_suite_settings(tmp_path: Path) -> None:
    def suite(regression: str) -> dict[str, object]:
        return {"name": "s", "devices": ["host-cpu"], "models": ["m.onnx"], "regression": regression}

    parsed = parse_suite(
        suite(yaml.safe_load("{paired_max_rounds: 20, paired_budget_s: 90}")), tmp_path / "s.yaml"
    )
    assert (parsed.policy.paired_max_rounds, parsed.policy.paired_budget_s) == (20, 90.0)
    default = parse_suite({"name": "s", "devices": ["host-cpu"], "models": ["m.onnx"]}, tmp_path / "s.yaml")
    assert (default.policy.paired_max_rounds, default.policy.paired_budget_s) == (60, 300.0)
    for bad in ({"paired_max_rounds": 0}, {"paired_max_rounds": 2.5}, {"paired_budget_s": -1}):
        with pytest.raises(UsageError, match=r"regression\.paired_"):
            parse_suite(suite(bad), tmp_path / "s.yaml")
