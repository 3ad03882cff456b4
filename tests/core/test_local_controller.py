"""A plain `farm submit` finding this host's `farm serve`: the record `farm serve` writes, and each
reason a recorded controller is not used, against a real submit API on loopback (no Ray: its
index answers without the fleet behind it). The end to end run is tests/fleet/test_local_controller.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner

from ondevice_farm.api.local_controller import (
    CONTROLLER_FILE,
    find_local_controller,
    forget_controller,
    new_record,
    reachable_url,
    record_controller,
    store_identity,
)
from ondevice_farm.api.server import ApiServer, start_api_server
from ondevice_farm.cli.main import cli

TOKEN = "t0ken"


@pytest.fixture
def api() -> Iterator[ApiServer]:
    # the index (what the probe asks) answers without a submission service behind it
    server = start_api_server(cast(Any, None), TOKEN, "127.0.0.1", 0)
    try:
        yield server
    finally:
        server.stop()


def _record(tmp_path: Path, url: str, pid: int | None = None) -> tuple[Path, Path]:
    store = tmp_path / "results.sqlite"
    record = tmp_path / CONTROLLER_FILE
    controller = new_record(url, store, "0.1.0")
    if pid is not None:
        controller = type(controller)(**{**controller.to_json(), "pid": pid})
    record_controller(record, controller)
    return record, store


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_running_controller_is_found(tmp_path: Path, api: ApiServer) -> None:
    record, store = _record(tmp_path, api.url)
    found = find_local_controller(record, store, TOKEN)
    assert found.controller is not None and found.why_not is None
    assert found.controller.url == api.url and found.controller.pid == os.getpid()
    assert TOKEN not in record.read_text()  # nothing secret in the record
    assert oct(record.stat().st_mode & 0o777) == oct(0o644)


def test_nothing_recorded_is_nothing_to_say(tmp_path: Path) -> None:
    found = find_local_controller(tmp_path / CONTROLLER_FILE, tmp_path / "results.sqlite", TOKEN)
    assert found.controller is None and found.why_not is None


def test_a_dead_pid_makes_the_record_stale(tmp_path: Path, api: ApiServer) -> None:
    record, store = _record(tmp_path, api.url, pid=_dead_pid())
    found = find_local_controller(record, store, TOKEN)
    assert found.controller is None
    assert found.why_not is not None and "stale" in found.why_not and "process is gone" in found.why_not
    assert "\n" not in found.why_not


def test_an_api_that_does_not_answer_makes_the_record_stale(tmp_path: Path) -> None:
    record, store = _record(tmp_path, f"http://127.0.0.1:{_closed_port()}")
    found = find_local_controller(record, store, TOKEN, timeout_s=0.5)
    assert found.controller is None
    assert found.why_not is not None and "did not answer" in found.why_not


def test_a_refused_token_is_said(tmp_path: Path, api: ApiServer) -> None:
    record, store = _record(tmp_path, api.url)
    found = find_local_controller(record, store, "another token")
    assert found.controller is None and found.why_not is not None and "refused" in found.why_not


def test_a_controller_storing_elsewhere_is_not_used(tmp_path: Path, api: ApiServer) -> None:
    record, _ = _record(tmp_path, api.url)
    found = find_local_controller(record, tmp_path / "other.sqlite", TOKEN)
    assert found.controller is None and found.why_not is not None and "other.sqlite" in found.why_not


def test_a_controller_with_other_device_profiles_is_not_used(tmp_path: Path, api: ApiServer) -> None:
    store = tmp_path / "results.sqlite"
    record = tmp_path / CONTROLLER_FILE
    record_controller(record, new_record(api.url, store, "0.1.0", tmp_path / "lab-profiles"))
    same = find_local_controller(record, store, TOKEN, profiles_dir=tmp_path / "lab-profiles")
    assert same.controller is not None
    other = find_local_controller(record, store, TOKEN, profiles_dir=tmp_path / "my-profiles")
    assert other.controller is None and other.why_not is not None and "my-profiles" in other.why_not


def test_a_garbled_record_is_ignored(tmp_path: Path) -> None:
    record = tmp_path / CONTROLLER_FILE
    record.write_text("{not json")
    found = find_local_controller(record, tmp_path / "results.sqlite", TOKEN)
    assert (
        found.controller is None and found.why_not is not None and "not a controller record" in found.why_not
    )


def test_only_its_own_record_is_forgotten(tmp_path: Path) -> None:
    record, _ = _record(tmp_path, "http://127.0.0.1:9478")
    forget_controller(record, os.getpid() + 1)  # another `farm serve` that stopped
    assert record.exists()
    forget_controller(record, os.getpid())
    assert not record.exists()


def test_store_identity_and_url_keep_no_secret() -> None:
    assert (
        store_identity("postgresql://farm:hunter2@db:5432/farm?password=x")
        == "postgresql://farm@db:5432/farm"
    )
    assert reachable_url("0.0.0.0", 9478) == "http://127.0.0.1:9478"
    assert reachable_url("::", 9478) == "http://[::1]:9478"


def test_embedded_and_address_together_are_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--home", str(tmp_path), "submit", "m.onnx", "--embedded", "--address", "http://127.0.0.1:1"]
    )
    assert result.exit_code == 2
    assert "--embedded" in result.output and len(result.output.strip().splitlines()) == 1


def test_a_stale_record_is_said_in_one_line(tmp_path: Path, api: ApiServer) -> None:
    """The CLI's side: the line on stderr, then the embedded path (here it stops at once: no model)."""
    record, _ = _record(tmp_path, api.url, pid=_dead_pid())
    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "submit", str(tmp_path / "missing.onnx")])
    lines = [line for line in result.output.splitlines() if "ignoring the stale" in line]
    assert len(lines) == 1 and str(record) in lines[0] and "embedded" in lines[0]
    assert json.loads(record.read_text())["pid"] != os.getpid()
