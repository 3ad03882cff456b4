from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ondevice_farm.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_MODEL = REPO / "examples" / "tinynet.onnx"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "farm-home"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "tinynet.onnx"
    shutil.copy(EXAMPLE_MODEL, path)
    return path


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    """One embedded Ray for the in-process CLI tests (`farm submit` reuses a running one)."""
    import ray

    ray.init(
        address="local",
        include_dashboard=False,
        num_cpus=2,
        object_store_memory=128 * 1024 * 1024,
        namespace="farm",
        log_to_driver=False,
        logging_level="ERROR",
    )
    try:
        yield
    finally:
        ray.shutdown()


def farm(home: Path, *args: str, profiles_dir: Path | None = None) -> Result:
    """Run the CLI in-process, stdout and stderr kept apart."""
    extra = ["--profiles-dir", str(profiles_dir)] if profiles_dir else []
    return CliRunner().invoke(cli, ["--home", str(home), *extra, *args], catch_exceptions=False)


def farm_json(home: Path, *args: str, profiles_dir: Path | None = None) -> dict[str, Any]:
    result = farm(home, *args, "--json", profiles_dir=profiles_dir)
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def farm_process(
    home: Path, *args: str, env: dict[str, str] | None = None, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the real `farm` entry point in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "ondevice_farm", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
    )
