"""`onnxruntime_perf_test` jobs over the ADB peer: the timed run, then the warm load as a second
perf_test process, each figure parsed from perf_test's own lines.

No perf_test build exists for this host, so the peer's unit runs `adb_peer/perf_test_standin.py`,
which measures with this host's onnxruntime and prints perf_test's lines; the first test holds
those lines to the shape of a recorded real perf_test output, so the parser meets the real format.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner

from ondevice_farm.cli.main import cli
from ondevice_farm.profiles import load_profiles
from ondevice_farm.targets import Target
from ondevice_farm_agents.android.agent import DEFAULT_PERF_TEST_PATH, PERF_TEST
from ondevice_farm_agents.android.perf_test import command_line, parse_output
from ondevice_farm_agents.android.test_data import write_test_data
from ondevice_farm_agents.base import WARM_LOAD_SECOND_PROCESS, AgentSettings, RunRequest
from tests.android.conftest import FIXTURES
from tests.android.peer_fixtures import PEER_IO_TIMEOUT_S, PeerHandle, one_unit

REPO = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).parent / "adb_peer" / "perf_test_standin.py"
RECORDED = FIXTURES / "perf_test" / "android_vivo_x300_sme2_resnet50v2.txt"
Model = tuple[Path, str, dict[str, np.ndarray]]
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?")


def _shape(text: str) -> list[str]:
    """Each line with its numbers masked: what a format is, whatever was measured."""
    return [_NUMBER.sub("#", line) for line in text.strip().splitlines()]


def _install_perf_test(peer: PeerHandle) -> None:
    """What docs/android.md has a user do by hand: put perf_test at the profile's path."""
    binary = peer.sandbox / DEFAULT_PERF_TEST_PATH.lstrip("/")
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(STANDIN, binary)
    binary.chmod(0o755)


def _perf_test_settings(peer: PeerHandle) -> AgentSettings:
    profiles = load_profiles()
    pixel8 = profiles["pixel8"]
    profiles["pixel8"] = dataclasses.replace(pixel8, runner={**pixel8.runner, "kind": PERF_TEST})
    return AgentSettings(
        profiles=profiles,
        adb_tcp_addresses=(peer.address,),
        adb_key_path=peer.key_path,
        io_timeout_s=PEER_IO_TIMEOUT_S,
    )


def test_the_standin_prints_the_lines_of_a_recorded_perf_test(small_model: Model, tmp_path: Path) -> None:
    path, _, inputs = small_model
    shutil.copy(path, tmp_path / "model.onnx")
    write_test_data(inputs, tmp_path)
    argv = command_line(str(STANDIN), str(tmp_path / "model.onnx"), Target.parse("ort/cpu"), 5, threads=1)
    done = subprocess.run(
        [sys.executable, *argv[:-1], "-Z", argv[-1]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # the recording ran with -x 1 -Z -r 5 -s: so does this, and every line has its shape
    assert _shape(done.stdout) == _shape(RECORDED.read_text())
    summary = parse_output(done.stdout)
    assert summary.requests == 5 and summary.session_creation_ms and summary.session_creation_ms > 0
    # each latency the tool printed, in seconds, read back in milliseconds under its own name
    line = r"^(Min|Max|P50|P90|P95|P99|P999) Latency: ([0-9.eE+-]+) s$"
    printed = dict(re.findall(line, done.stdout, re.M))
    assert set(printed) == {"Min", "Max", "P50", "P90", "P95", "P99", "P999"}, done.stdout
    assert summary.latency_ms == {k.lower(): pytest.approx(float(v) * 1000) for k, v in printed.items()}


def test_a_perf_test_job_reports_a_warm_load_from_a_second_process(
    pixel8_peer: PeerHandle, small_model: Model
) -> None:
    _install_perf_test(pixel8_peer)
    path, sha, inputs = small_model
    request = RunRequest(path, sha, Target.parse("ort/cpu"), inputs, warmup=1, runs=3, timeout_s=60)
    with one_unit(_perf_test_settings(pixel8_peer)) as (agent, unit):
        agent.prepare(unit, request)
        run = agent.run(unit, request)
    assert run.runner == f"onnxruntime_perf_test ({DEFAULT_PERF_TEST_PATH})"
    assert run.load_ms > 0 and run.latency_summary_ms["p50"] > 0 and run.samples_ms == []
    assert run.warm_load_ms is not None and run.warm_load_ms > 0
    assert run.warm_load_method == WARM_LOAD_SECOND_PROCESS
    assert any(n.startswith("warm load: a second onnxruntime_perf_test process") for n in run.notes)
    # the profiled pass (-p) is a third process; its trace comes back as on a device
    assert run.ops and set(run.placement.values()) == {"CPUExecutionProvider"}


def test_a_second_perf_test_that_fails_costs_the_warm_figure_only(
    pixel8_peer: PeerHandle, small_model: Model
) -> None:
    """A perf_test that runs once and then is gone (removed, or the unit's storage cleaned in
    between): the timed figures stay, the warm load is absent and says why."""
    _install_perf_test(pixel8_peer)
    binary = pixel8_peer.sandbox / DEFAULT_PERF_TEST_PATH.lstrip("/")
    # the stand-in removes itself once it has run: the second invocation finds nothing to run
    binary.write_text(
        STANDIN.read_text().replace("sys.exit(main(", "Path(__file__).unlink()\n    sys.exit(main(")
    )
    path, sha, inputs = small_model
    request = RunRequest(
        path, sha, Target.parse("ort/cpu"), inputs, warmup=1, runs=3, timeout_s=60, profile_ops=False
    )
    with one_unit(_perf_test_settings(pixel8_peer)) as (agent, unit):
        agent.prepare(unit, request)
        run = agent.run(unit, request)
    assert run.load_ms > 0 and run.latency_summary_ms["p50"] > 0
    assert run.warm_load_ms is None and run.warm_load_method == ""
    assert any(n.startswith("no warm load: the second onnxruntime_perf_test exited with") for n in run.notes)


def test_farm_submit_stores_the_perf_test_warm_load_with_its_method(
    pixel8_peer: PeerHandle, tmp_path: Path
) -> None:
    """`farm submit --devices pixel8` with the profile's runner set to perf_test: the job document
    (schema-checked) carries both loads and says the warm one came from a second process."""
    _install_perf_test(pixel8_peer)
    profiles = tmp_path / "profiles"
    shutil.copytree(REPO / "device_profiles", profiles)
    pixel8 = profiles / "pixel8.yaml"
    text = pixel8.read_text().replace("cooldown_s: 30", "cooldown_s: 0")
    pixel8.write_text(text.replace("  kind: native", f"  kind: {PERF_TEST}", 1))
    model = tmp_path / "tinynet.onnx"
    shutil.copy(REPO / "examples/tinynet.onnx", model)
    args = ["--home", str(tmp_path / "home"), "--profiles-dir", str(profiles), "submit", str(model)]
    args += ["--devices", "pixel8", "--adb", pixel8_peer.address, "--targets", "ort/cpu", "--runs", "3"]
    args += ["--no-profile", "--json"]
    result = CliRunner().invoke(
        cli, args, env={"FARM_ADB_KEY": str(pixel8_peer.key_path)}, catch_exceptions=False
    )
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    jsonschema.validate(
        document, json.loads((REPO / "farm/ondevice_farm/schema/run.schema.json").read_text())
    )
    (job,) = document["jobs"]
    assert job["status"] == "ok" and job["runner"].startswith("onnxruntime_perf_test")
    assert job["load_ms"] > 0 and job["warm_load_ms"] > 0
    assert job["warm_load_method"] == WARM_LOAD_SECOND_PROCESS
