"""A suite entry carries `generate:` as `farm submit --generate` does: the nightly runs the folder
as a generation job and its regression test reads the job's per-token decode latency."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ondevice_farm.errors import UsageError
from ondevice_farm.nightly.suite import parse_suite
from tests.fleet.conftest import only_loopback


def test_a_suite_entry_carries_a_generation_spec(tmp_path: Path) -> None:
    suite = parse_suite(
        {
            "name": "g",
            "devices": ["host-cpu"],
            "models": [{"path": "m", "generate": "prompt=16,decode=8"}, "x.onnx"],
        },
        tmp_path / "suite.yaml",
    )
    generation, plain = suite.models
    assert generation.generate is not None and generation.generate.decode_tokens == 8
    assert plain.generate is None
    with pytest.raises(UsageError, match=r"models\[0\]\.generate: --generate: decode must be at least 2"):
        parse_suite({"name": "g", "devices": ["host-cpu"], "models": [{"path": "m", "generate": "decode=1"}]},
                    tmp_path / "suite.yaml")  # fmt: skip


def test_the_nightly_runs_a_generation_entry(tmp_path: Path, tiny_llama: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"name: genai\ndevices: [host-cpu]\nrepeats: 2\nmodels:\n"
        f"  - path: {tiny_llama}\n    generate: prompt=16,decode=8,reps=2\n"
    )
    home = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "ondevice_farm", "--home", home, "nightly", str(suite), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    run = document.get("run", document)
    (job,) = run["jobs"]
    assert job["status"] == "ok" and job["generation"]["agreement"]["share"] == 1.0
    assert job["latency_ms"]["spread"]["sessions"] == 2  # the regression test's sessions
    assert (job["generation"]["prompt_tokens"], job["generation"]["decode_tokens"]) == (16, 8)


def test_a_changed_folder_is_judged_on_ttft_and_decode_beside_its_last_good_one(
    tmp_path: Path, tiny_llama: Path, slower_llama: Path
) -> None:
    """Night 1 runs the tiny folder; by night 2 the same entry's folder is the bigger Llama: its last
    good folder (A) runs beside it (B) in interleaved rounds, judged by the paired test on TTFT and
    decode tokens/s, each one test of the night's Bonferroni family; a regression on both."""
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    folder = tmp_path / "llama"
    shutil.copytree(tiny_llama, folder)
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        f"name: genai-paired\ndevices: [host-cpu]\nrepeats: 1\nmodels:\n"
        f"  - path: {folder}\n    generate: prompt=32,decode=16,reps=3\n"
        "regression: {paired_max_rounds: 10, paired_budget_s: 60}\n"
    )
    home = str(tmp_path / "home")
    nightly = [sys.executable, "-m", "ondevice_farm", "--home", home, "nightly", str(suite), "--json"]
    first = subprocess.run(nightly, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    shutil.rmtree(folder)
    shutil.copytree(slower_llama, folder)  # tonight's folder: twice the width and the layers
    second = subprocess.run(nightly, capture_output=True, text=True, timeout=300)
    assert second.returncode == 1, second.stderr[-3000:]  # 1 on a regression
    document = json.loads(second.stdout)
    (entry,) = document["comparison"]["jobs"]
    assert entry["judged_by"] == "paired" and entry["verdict"] == "regressed", entry
    metrics = entry["paired_metrics"]
    assert {m: metrics[m]["verdict"] for m in metrics} == {
        "ttft_ms": "slower",
        "decode_tokens_per_s": "slower",
    }
    assert all(metrics[m]["interval"][0] > 1.0 for m in metrics)
    (job,) = document["jobs"]
    (first_job,) = json.loads(first.stdout)["jobs"]
    baseline = job["paired_baseline"]
    assert baseline["artifact_sha256"] == first_job["artifact_sha256"] != job["artifact_sha256"]
    assert baseline["metrics"] == ["ttft_ms", "decode_tokens_per_s"]
    assert baseline["alpha"] == pytest.approx(0.01 / 2)  # one changed job, two tests: alpha / 2 each
    rounds = job["paired"]["rounds"]
    assert 5 <= len(rounds) <= 10 and all(r["candidate_ttft_ms"] > r["baseline_ttft_ms"] for r in rounds)
    schema = json.loads(
        (Path(__file__).resolve().parents[2] / "farm/ondevice_farm/schema/run.schema.json").read_text()
    )
    jsonschema.validate(job, {"$defs": schema["$defs"], "$ref": "#/$defs/ok_job"})
