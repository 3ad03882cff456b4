"""A farm command that starts an embedded Ray takes its session directory with it: nothing piles
up in Ray's temp folder, and a session directory that is not its own is left alone."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ray_tmp() -> Iterator[Path]:
    # short: Ray's unix sockets live under it, and socket paths are limited to ~107 bytes
    path = Path(tempfile.mkdtemp(prefix="fr", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_submit_leaves_no_session_dir(tmp_path: Path, ray_tmp: Path) -> None:
    if not all(name == "lo" for _, name in socket.if_nameindex()):
        pytest.skip("run inside a network namespace with only `lo` (scripts/test, or `unshare -n`)")
    ray_dir = ray_tmp / "ray"  # Ray's temp folder under $RAY_TMPDIR
    other = ray_dir / "session_2026-01-01_00-00-00_000000_1"  # another Ray's, not ours
    other.mkdir(parents=True)
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmp), "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "ondevice_farm", "--home", str(tmp_path / "home"), "submit",
         str(ROOT / "examples" / "tinynet.onnx"), "-d", "host-cpu", "-n", "3", "--no-profile", "--json"],
        capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    sessions = sorted(p.name for p in ray_dir.iterdir() if p.name.startswith("session_"))
    assert sessions == [other.name], sessions


def test_remove_session_dir_touches_only_that_dir(tmp_path: Path) -> None:
    from ondevice_farm.controller.cluster import remove_session_dir

    ours, theirs = tmp_path / "session_a", tmp_path / "session_b"
    for d in (ours, theirs):
        (d / "logs").mkdir(parents=True)
    (tmp_path / "session_latest").symlink_to(theirs)
    remove_session_dir(ours)
    assert not ours.exists() and theirs.exists() and (tmp_path / "session_latest").is_symlink()
    (tmp_path / "session_latest").unlink()
    (tmp_path / "session_latest").symlink_to(theirs)
    remove_session_dir(theirs)
    assert not theirs.exists() and not (tmp_path / "session_latest").is_symlink()
    keep = tmp_path / "not-a-session"
    keep.mkdir()
    remove_session_dir(keep)
    assert keep.exists()
