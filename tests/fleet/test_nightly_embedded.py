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
    suite.write_text((ROOT / "examples" / "suite.yaml").read_text().replace("runs: 30", "runs: 5"))
    first = farm(tmp_path / "home", "nightly", str(suite), "--json")
    assert first.returncode == 0, first.stderr[-2000:]
    document = json.loads(first.stdout)
    assert (document["kind"], document["suite"], document["status"]) == (
        "nightly",
        "example-nightly",
        "complete",
    )
    (job,) = document["jobs"]
    assert job["device"] == "host-cpu" and job["status"] == "ok" and len(job["latency_ms"]["samples"]) == 5
    assert document["comparison"]["baseline_run"] is None

    bad = farm(tmp_path / "home", "nightly", str(suite), "--baseline", "no-such-run")
    assert bad.returncode == 2 and "no run 'no-such-run'" in bad.stderr
