"""`farm serve --gc-every`: the schedule collects on its own, and a bad setting stops serve first."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from click.testing import CliRunner

from ondevice_farm.artifacts import ArtifactStore
from ondevice_farm.cli.gc import policy_from
from ondevice_farm.cli.main import cli
from ondevice_farm.config import FarmHome
from ondevice_farm.durations import parse_duration_s
from ondevice_farm.gc.policy import DEFAULT_KEEP_RUNS, RetentionPolicy
from ondevice_farm.gc.schedule import GcSchedule
from ondevice_farm.nightly.run import HISTORY_RUNS
from tests.compare.conftest import matmul_chain


def test_the_schedule_removes_an_old_artifact_and_says_so(tmp_path: Path) -> None:
    home = FarmHome(tmp_path / "home")
    _, path = ArtifactStore(home.artifacts).put(matmul_chain(tmp_path / "m.onnx", 1, width=8), "model.onnx")
    old = time.time() - 90 * 86400
    os.utime(path.parent, (old, old))
    os.utime(path, (old, old))
    lines: list[str] = []
    said = threading.Event()

    def log(line: str) -> None:
        lines.append(line)
        said.set()

    schedule = GcSchedule(home, home.store_path, RetentionPolicy(), 0.1, log).start()
    try:
        assert said.wait(10), "the schedule never collected"
    finally:
        schedule.stop()
    assert not path.parent.exists()
    assert lines[0].startswith("gc: removed 0 run(s) and 1 cache entry:"), lines


def test_a_bad_gc_setting_stops_serve_before_anything_starts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    bad_every = CliRunner().invoke(cli, ["--home", str(home), "serve", "--gc-every", "weekly"])
    assert bad_every.exit_code == 2
    assert "--gc-every: 'weekly' is not a duration" in bad_every.output
    bad_env = CliRunner().invoke(
        cli, ["--home", str(home), "serve", "--gc-every", "6h"], env={"FARM_GC_KEEP_RUNS": "0"}
    )
    assert bad_env.exit_code == 2 and "--gc-keep-runs must be at least 1" in bad_env.output
    bad_size = CliRunner().invoke(cli, ["--home", str(home), "serve", "--gc-max-bytes", "lots"])
    assert bad_size.exit_code == 2 and "--gc-max-bytes: 'lots' is not a size" in bad_size.output
    assert not home.exists()  # nothing written


def test_the_deploy_kits_gc_settings_are_valid() -> None:
    env_file = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "farm.env"
    lines = [line for line in env_file.read_text().splitlines() if line and not line.startswith("#")]
    env = dict(line.split("=", 1) for line in lines)
    policy = policy_from(int(env["FARM_GC_KEEP_RUNS"]), float(env["FARM_GC_KEEP_DAYS"]), None, "gc-")
    # the nightly reads a job's last HISTORY_RUNS successes: the default and the kit keep them all
    assert policy.keep_runs >= HISTORY_RUNS and DEFAULT_KEEP_RUNS >= HISTORY_RUNS
    assert parse_duration_s(env["FARM_GC_EVERY"], "FARM_GC_EVERY") == 24 * 3600


def test_gc_of_a_farm_directory_never_made_makes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "never"
    done = CliRunner().invoke(cli, ["--home", str(home), "gc"])
    assert done.exit_code == 0 and "removed 0 run(s) and 0 cache entries" in done.stdout
    assert not home.exists()
