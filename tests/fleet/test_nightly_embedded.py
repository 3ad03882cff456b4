"""`farm nightly` with no cluster: an embedded local Ray serves this host's own units."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet.conftest import only_loopback

ROOT = Path(__file__).resolve().parents[2]
FARM = str(Path(sys.executable).parent / "farm")

pytestmark = pytest.mark.slow


def farm(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "FARM_SIMULATED_DEVICES")}
    return subprocess.run(
        [FARM, "--home", str(home), *args], env=env, capture_output=True, text=True, timeout=180
    )


def test_the_example_suite_runs_embedded_and_names_its_baseline(tmp_path: Path) -> None:
    if not only_loopback():
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    shutil.copy(ROOT / "examples" / "tinynet.onnx", tmp_path / "tinynet.onnx")
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        (ROOT / "examples" / "suite.yaml")
        .read_text()
        .replace("runs: 30", "runs: 5")
        .replace("repeats: 5", "repeats: 2")
    )
    first = farm(tmp_path / "home", "nightly", str(suite), "--json")
    assert first.returncode == 0, first.stderr[-2000:]
    document = json.loads(first.stdout)
    assert (document["kind"], document["suite"], document["status"]) == (
        "nightly",
        "example-nightly",
        "complete",
    )
    (job,) = document["jobs"]
    assert job["device"] == "host-cpu" and job["status"] == "ok" and len(job["latency_ms"]["samples"]) == 10
    assert document["comparison"]["baseline_run"] is None
    # the suite's model description is kept by content hash, as `farm submit` keeps it
    assert any((tmp_path / "home" / "models").iterdir())

    # unchanged: the second night exits 0 and shows the numbers behind its verdict
    second = farm(tmp_path / "home", "nightly", str(suite), "--html", str(tmp_path / "nightly.html"))
    assert second.returncode == 0, second.stderr[-2000:]
    lines = second.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    row = next(line for line in lines if line.startswith("tinynet"))
    assert "%" in row and "x" in row  # change and interval of the ratio
    assert "no regressions" in second.stdout
    assert "baseline p50 ms" in (tmp_path / "nightly.html").read_text()
    # the third night from Python (`ondevice_farm.run_suite`, docs/python.md): the same night's verdict
    program = (
        "import json, sys, ondevice_farm as farm\n"
        "from ondevice_farm.python_api.values import thawed\n"
        "night = farm.run_suite(sys.argv[1], farm=farm.Farm(home=sys.argv[2]))\n"
        "print(json.dumps({**thawed(night.document), 'regressions': len(night.regressions),\n"
        "                  'verdicts': [v.verdict for v in night.verdicts]}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "FARM_SIMULATED_DEVICES")}
    api = subprocess.run(
        [sys.executable, "-c", program, str(suite), str(tmp_path / "home")],
        env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert api.returncode == 0, api.stderr[-2000:]
    from_python = json.loads(api.stdout)
    third = {**from_python["run"], "comparison": from_python["comparison"]}
    assert from_python["regressions"] == 0 and len(from_python["verdicts"]) == 1
    (entry,) = third["comparison"]["jobs"]
    assert entry["baseline_run"] not in (None, third["run_id"])
    assert entry["latency"]["baseline_p50"] > 0 and entry["latency"]["sessions"] == [2, 2]
    assert set(entry["latency"]) >= {"change_pct", "ci", "p_slower", "p_adjusted"}

    bad = farm(tmp_path / "home", "nightly", str(suite), "--baseline", "no-such-run")
    assert bad.returncode == 2 and "no run 'no-such-run'" in bad.stderr

    # `farm report` of a nightly run names the suite and its models, not a model it does not have
    report = farm(tmp_path / "home", "report", third["run_id"], "--html", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr[-2000:]
    html = (tmp_path / "report.html").read_text()
    assert f"<title>farm report: nightly example-nightly, 1 model(s): tinynet (run {third['run_id']})" in html
    # and so does `farm show` of it (it stopped on the missing model with an internal error, exit 70)
    show = farm(tmp_path / "home", "show", third["run_id"])
    assert show.returncode == 0, show.stderr[-2000:]
    assert "nightly example-nightly, 1 model(s): tinynet" in show.stdout
