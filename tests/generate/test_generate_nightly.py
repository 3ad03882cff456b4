"""A suite entry carries `generate:` as `farm submit --generate` does: the nightly runs the folder
as a generation job and its regression test reads the job's per-token decode latency."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ondevice_farm.errors import UsageError
from ondevice_farm.nightly.suite import parse_suite


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
