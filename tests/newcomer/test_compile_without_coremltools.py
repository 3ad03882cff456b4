"""`farm compile -t ort/cpu,ort/nnapi,coreml/ane` without coremltools: the ONNX Runtime targets
are compiled and reported, the CoreML one fails on its own with the install hint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: a Python in which `import coremltools` fails as it does where the extra is not installed
WITHOUT_COREMLTOOLS = (
    "import sys; sys.modules['coremltools'] = None; "
    "from ondevice_farm.cli.main import main; sys.argv[0] = 'farm'; main()"
)


def _compile(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_COREMLTOOLS, "--home", str(tmp_path), "compile",
         str(ROOT / "examples" / "tinynet.onnx"), "-t", "ort/cpu,ort/nnapi,coreml/ane", *args],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_ort_targets_compile_and_coreml_fails_alone(tmp_path: Path) -> None:
    done = _compile(tmp_path)
    assert done.returncode != 0
    assert "ort/cpu: 61 nodes" in done.stdout and "ort/nnapi: 61 nodes" in done.stdout
    assert "coreml/ane: failed" in done.stdout and "coreml]" in done.stdout
    assert "1 of 3 targets failed: coreml/ane" in done.stderr


def test_json_lists_every_target(tmp_path: Path) -> None:
    done = _compile(tmp_path, "--json", "--report-only")
    assert done.returncode == 0, done.stderr
    targets = {t["target"]: t for t in json.loads(done.stdout)["targets"]}
    assert "report" in targets["ort/cpu"] and "report" in targets["ort/nnapi"]
    assert "coremltools" in targets["coreml/ane"]["error"]
    assert "[coreml]" in targets["coreml/ane"]["hint"]
