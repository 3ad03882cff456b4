"""The nightly runs a changed model's last good artifact beside it and judges it by the paired test."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

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
    )
    first = farm(home, "nightly", str(suite), "--json")
    assert first.returncode == 0, first.stderr[-2000:]

    matmul_chain(changing, 12)  # tonight's artifact does twice the work
    second = farm(home, "nightly", str(suite), "--json")
    assert second.returncode == 1, second.stderr[-2000:]  # exit codes as documented: 1 on regression
    document = json.loads(second.stdout)
    entries = {e["model"]: e for e in document["comparison"]["jobs"]}
    changed = entries["changing"]
    assert changed["judged_by"] == "paired" and changed["verdict"] == "regressed"
    assert changed["paired"]["ratio"] > 1.4 and changed["paired"]["interval"][0] > 1.0
    assert changed["baseline_run"] == document["comparison"]["baseline_run"]
    job = next(j for j in document["jobs"] if j["model"]["name"] == "changing")
    first_job = next(j for j in json.loads(first.stdout)["jobs"] if j["model"]["name"] == "changing")
    assert job["paired_baseline"]["artifact_sha256"] == first_job["artifact_sha256"]
    assert job["paired"]["rounds"] and {r["order"] for r in job["paired"]["rounds"]} <= {"AB", "BA"}
    schema = json.loads((Path(__file__).resolve().parents[2] / "farm/schema/run.schema.json").read_text())
    jsonschema.validate(job, {"$defs": schema["$defs"], "$ref": "#/$defs/ok_job"})
    # the model that did not change keeps the history test, and no paired rounds were run for it
    assert entries["steady"]["judged_by"] != "paired" and entries["steady"]["paired"] is None
    assert "paired" not in next(j for j in document["jobs"] if j["model"]["name"] == "steady")
