"""Real host runs for the report tests: `farm submit` of examples/tinynet.onnx on host-cpu, twice,
into one farm home (an embedded Ray each time: run this suite in a network namespace with only
`lo` up, as scripts/test does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TINYNET = REPO / "examples" / "tinynet.onnx"
ARTIFACTS = REPO / "test-artifacts"
SUBMIT_TIMEOUT_S = 180


@dataclass(frozen=True)
class HostRuns:
    home: Path
    first: dict[str, Any]
    second: dict[str, Any]


def farm(home: Path, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", FARM_HOME=str(home))
    return subprocess.run(
        [sys.executable, "-c", "from ondevice_farm.cli.main import main; main()", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=REPO,
        check=False,
    )


def _submit(home: Path) -> dict[str, Any]:
    done = farm(
        home,
        "submit",
        str(TINYNET),
        "--devices",
        "host-cpu",
        "--runs",
        "5",
        "--json",
        timeout_s=SUBMIT_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    document: dict[str, Any] = json.loads(done.stdout)
    return document


@pytest.fixture(scope="session")
def host_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostRuns]:
    home = tmp_path_factory.mktemp("farm-home")
    yield HostRuns(home, _submit(home), _submit(home))


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
